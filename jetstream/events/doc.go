// Package events publishes OJS lifecycle events (ojs-events.md) on NATS and
// lists the recent ones for GET /ojs/v1/events.
//
// It owns the event envelope (specversion, id "evt_"+UUIDv7, type, source,
// time, subject, datacontenttype, data), the data schemas of the job and
// queue events (section 4), the event subjects ojs.events.<type> and the
// stream topology.EventStream that keeps them for a while (memory storage, capped at 64 MiB,
// limits retention, MaxAge 24h and MaxMsgs 100_000 by default, discard
// old).
//
// Publishing is core NATS (nc.Publish): no JetStream ack round trip, no
// blocking on the server, no error returned to the caller. Events must
// never slow or fail the job path, so a failure is logged at debug level and
// counted (Stats). The stream captures events with NoAck set. Delivery is
// therefore best-effort in the sense of ojs-events.md section 9.1: an event
// published while the connection is down, or beyond the reconnect buffer,
// is lost. Events of one job leave one process in lifecycle order; when two
// jetgate processes handle the same job the order is the order their
// publishes reach the server.
//
// Anyone may subscribe to ojs.events.> (or ojs.events.job.completed, ...)
// for a live feed; Recent reads the stream from its tail, newest first,
// through short-lived filtered consumers, and never walks the whole stream.
//
// This package never decides anything about jobs and never touches job
// records: callers tell it what happened. A nil *Publisher is valid and
// drops every event.
package events
