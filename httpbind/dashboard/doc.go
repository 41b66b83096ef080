// Package dashboard serves jetgate's live web dashboard: GET / (the page),
// GET /dashboard/assets/* (its script and style, embedded with embed: no
// CDN, no build step), GET /dashboard/snapshot (one Snapshot as JSON) and
// GET /dashboard/stream (server-sent events: a snapshot every second and
// the new events as they are seen). docs/dashboard.md describes the page.
//
// It owns the page, the Snapshot document and the one goroutine (the
// feeder, hub.go) that reads a snapshot for all open streams at once, and
// runs only while a stream is open.
//
// It must never:
//   - touch NATS or JetStream, or decide anything: it reads through
//     Backend, the exported admission/admin operations that already serve
//     the HTTP routes (queue list, admin queue, priority stats, rate-limit
//     listing, recent events, health); it adds no JetStream state and no
//     write to any job's life;
//   - read per job: a snapshot costs a fixed number of reads per queue and
//     per rate-limit key, bounded by Config.MaxQueues and MaxKeys, and
//     one snapshot per Interval whatever the number of open pages;
//   - log or echo a token (auth.go).
//
// Queue depth is computed from the queue's counts, as the admin API
// shows them (admission's stats: available jobs from the ready stream, the
// others from counters): available + scheduled + retryable + pending
// (+ active with count_active), ojs-backpressure.md 3's count. The bound
// itself is enforced on admission's depth units, which can differ from the
// counts for the moment a job is between the two. The dashboard shows the
// counts because the operation that reads the units, QueueStats (GET
// /ojs/v1/queues/{name}/stats), also reads the queue's last hour of
// samples through an ordered consumer: a consumer per queue every second
// is too dear for a page that may stay open all day.
package dashboard
