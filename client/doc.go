// Package client is jetgate's Go client and worker: it speaks the OJS
// operations over the HTTP binding or over the NATS binding (the `ojs` micro
// service, subjects ojs.v1.<area>.<op>) behind one typed API.
//
// A Client enqueues (Enqueue, EnqueueBatch with typed options for every
// extension field), reads and cancels jobs, reads queue stats and speaks
// the worker operations (Fetch, Ack, Nack, Heartbeat, Progress, and over
// NATS AckBatch / NackBatch). Errors the server answers are *Error values
// carrying the status, the OJS error code, the message, whether retrying
// may help and the details.
//
// Producers get the client side of ojs-backpressure.md section 8: an
// enqueue refused with 429 is retried with exponential backoff and jitter,
// never sooner than the Retry-After the server sent; after a run of 429s
// a circuit breaker refuses enqueues locally (ErrCircuitOpen) for a
// cooldown; and while the server reports X-OJS-Queue-Pressure above a
// threshold, enqueues to that queue are paced.
//
// A Worker runs handlers per job type with a context.Context that is
// cancelled at the job's execution timeout (cause ErrExecutionTimeout),
// when the server tells the worker the job is no longer its own (cancelled,
// or ended by the server: cause ErrJobCancelled) and at the end of a drain
// (cause ErrShutdown). It heartbeats its active jobs, lets handlers report
// progress (ReportProgress) and hold their rate-limit key
// (RateLimitedUntil), and drains on SIGTERM or Stop: it stops fetching,
// lets active jobs finish up to its drain timeout, and fails the rest with
// error type "shutdown" (ojs-worker-protocol.md 7.2). Over NATS it fetches
// with a server-side wait and acknowledges in batches
// (ojs.v1.workers.ackbatch / nackbatch); over HTTP it fetches for its free
// slots and acknowledges each job with a request, as the official OJS
// SDKs do.
//
// Run also handles the job-control signals: SIGTSTP quiets the worker,
// SIGCONT resumes it (ojs-worker-protocol.md 9).
//
// W3C trace context travels from producer to handler: a request made
// with a context holding an OpenTelemetry span sends the traceparent
// header, an enqueued job carries meta.traceparent, and a handler's
// context continues that span as its remote parent.
//
// The package never touches JetStream: it is a client of jetgate's public
// bindings, and the job envelope it returns is jetgate's own (ojs.Job).
package client
