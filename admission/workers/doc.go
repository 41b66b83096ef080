// Package workers is jetgate's worker registry (ojs-worker-protocol.md 3,
// 4, 10; ojs-graceful-shutdown.md 5; ojs-admin-api.md 9): which workers
// exist, when each was last seen, the state it reported (running, quiet,
// drain, terminate) and an operator's directive (quiet, terminate).
//
// The state lives in bucket OJS_WORKERS (topology.WorkersBucket), one
// entry per worker, key = escaped worker id, so every jetgate process
// shows the same workers. Entries expire topology.WorkersTTL after their
// last write: a dead worker vanishes by itself. Each process mirrors the
// bucket into a view through a KV watch; the view is only a cache.
//
// It meets admission through admission.WorkerHook: Admit is called by
// every fetch and costs a map lookup (no write, no round trip); a worker
// first seen by this process, or not written by it for Config.Refresh, is
// queued for a writer goroutine that records the sighting off the fetch's
// path. Beat (a heartbeat) and Directive (an operator) write at once.
// Every write is one compare-and-swap on the entry's revision, starting
// from the view's revision, so a directive written by one process is
// never lost to a heartbeat answered by another: the heartbeat's swap
// fails, rereads, and answers the directive.
//
// It must never touch jobs: a stale worker's jobs come back through their
// own heartbeat timeouts (admission's lease timers).
package workers
