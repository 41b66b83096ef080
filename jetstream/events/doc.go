// Package events publishes OJS lifecycle events (ojs-events.md) on NATS and
// lists the recent ones for GET /ojs/v1/events.
//
// It owns the event envelope (specversion, id "evt_"+UUIDv7, type, source,
// time, subject, datacontenttype, data), the data schemas of the job and
// queue events (section 4) and the event subjects ojs.events.<type>.
//
// Publishing is core NATS (nc.Publish): no JetStream ack round trip, no
// blocking on the server, no error returned to the caller. Events must
// never slow or fail the job path, so a failure is logged at debug level and
// counted (Stats). Delivery is therefore best-effort in the sense of
// ojs-events.md section 9.1: an event published while the connection is
// down, or beyond the reconnect buffer, is lost. Events of one job leave
// one process in lifecycle order; when two jetgate processes handle the
// same job the order is the order their publishes reach the server. Anyone
// may subscribe to ojs.events.> (or ojs.events.job.completed, ...) for a
// live feed: that is the product for NATS services.
//
// # Events nobody hears
//
// Config.Listening, when set, is asked before an event is built whether a
// message on its subject would reach anyone; when not, the event is not
// published (only kept in the own ring, below) and counted in
// Stats.Unheard. jetgate sets it only with its
// embedded server, whose subscription list answers exactly (one server,
// one client account, no gateways); every subscriber, stream and capture
// still gets every event.
//
// # Its own events
//
// Every Publisher keeps the last Config.OwnEvents events it emitted (1000
// by default), heard on NATS or not, each at most Config.OwnEventBytes (4
// KiB), in a ring of reused buffers (own.go). Recent merges them with the
// capture or the stream below, so that a process lists its own events
// from its first read (issue 32 events) without a NATS message or a stored
// one. A job event nobody heard is kept unencoded and encoded when read.
//
// # Large events
//
// An event beyond the connection's max_payload, or beyond OwnEventBytes
// for the ring's copy, is reduced rather than lost (reduce.go): without
// its result (result_omitted, result_bytes), else with only its small
// fields (data_truncated, event_bytes). Stats.Reduced counts such copies.
//
// # Storage: none by default
//
// Events are not stored per job by default. Storing three events per job
// in a stream was 3 of the 7 stored messages a job cost (issue 17), for a
// listing few deployments read. Without Config.Stream, Recent is served
// from a capture: a core NATS subscription to ojs.events.> (so it sees the
// events of every jetgate process and worker on the NATS system) feeding
// a buffer bounded by Config.BufferEvents and Config.BufferBytes (10,000
// events and 16 MiB by default, oldest dropped first). The capture runs
// only while someone reads: the first Recent subscribes, waits until the
// server has registered the subscription, and answers what arrived since
// (usually nothing, besides this Publisher's own events); after
// Config.BufferIdle (10 min) without a Recent it
// unsubscribes and frees the buffer. So a read lists only events
// published after the first read of the current run of the capture, on
// this process: events before it, or while it was stopped, and events of
// processes on other cluster servers until the subscription's interest
// has reached them (milliseconds), are missing. Each jetgate process has
// its own capture; the subscription costs nothing on the job path while
// it is stopped, and one delivered message per event while it runs.
//
// With Config.Stream (jetgate serve --events-stream) the stream
// topology.EventStream captures every event as before (memory storage,
// limits retention, MaxAge 24h, MaxMsgs 100_000 and MaxBytes 64 MiB by
// default, discard old, NoAck), Ensure creates it, and Recent reads it
// from its tail, newest first, through short-lived filtered consumers,
// never walking the whole stream. The stream is never required: /ready
// does not look for it. Without Config.Stream, Ensure leaves an existing
// event stream alone (another process may use it) but warns that it still
// stores every event.
//
// Both sources apply the same filters (types through the subject filters
// of filterSubjects, then ojs.EventQuery.Match).
//
// This package never decides anything about jobs and never touches job
// records: callers tell it what happened. A nil *Publisher is valid and
// drops every event.
package events
