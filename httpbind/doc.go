// Package httpbind speaks the OJS HTTP binding (spec/core/ojs-http-binding.md)
// for jetgate: it routes requests with gorilla/mux, decodes and validates
// their bodies, calls the Backend, and writes the binding's JSON shapes,
// headers and error envelopes.
//
// It owns:
//   - the route table of the core binding (see routes in server.go);
//   - the wire shapes: request decoding (strict about types, lenient about
//     unknown fields) and response rendering (jobs through ojs.Job.Public,
//     timestamps as ojs.Time);
//   - the headers every response carries (Content-Type
//     application/openjobspec+json on JSON bodies, OJS-Version, X-Request-Id),
//     the request Content-Type and OJS-Version checks, body size limits and
//     panic recovery;
//   - the single mapping from domain errors to HTTP status, OJS error code and
//     envelope (writeError in errors.go), including the 429 hook
//     (RateLimitedError).
//
// It must never:
//   - touch NATS or JetStream, or keep any state of its own between requests
//     (DESIGN.md: httpbind only decodes, validates and maps errors);
//   - make a scheduling decision: what is admitted, in what order, and what
//     waits belongs to admission, behind Backend;
//   - write an error status by hand: handlers return errors to writeError;
//   - leak internal error text to clients: errors that are not ojs typed
//     errors or sentinels answer a generic 500 and are logged.
//
// Choices where the specs are silent or disagree (each also noted at its code):
//   - 409 state conflicts use code invalid_request, as the binding's examples
//     do (9.4, 9.5, 10.2); ojs.ErrConflict (a lost compare-and-swap) is 409
//     "conflict", retryable.
//   - A path or body job id that is not a UUIDv7 cannot name a job: 404
//     not_found without a backend call. Queue names in paths and filters are
//     checked against the core pattern: 400 naming the field.
//   - Fetch count above Config.MaxFetchCount is served up to it (an SDK asks
//     for as many jobs as it has free handlers), never refused; list limits
//     above their maximum (queues 200, dead letter 100, events 1000) are
//     lowered, and the pagination object shows the limit used.
//   - A job id in an enqueue body must be a lowercase UUIDv7: an uppercase
//     one is 400 naming id (core 5.1 over json-format 6.2), not lowercased.
//   - Absent fetch visibility_timeout_ms stays 0 so a job's own
//     visibility_timeout_ms applies; Config.DefaultHeartbeatTimeout is only
//     published in the manifest.
//   - ack "result" may be any JSON value; nack "error" may be the binding's
//     object, the worker protocol's {type, message, backtrace}, or a string.
//   - Heartbeat ids that are not job ids are dropped before the backend.
//   - Events: "after", "queues" and "job_types" (ojs-events.md 6.4) answer 422
//     unsupported rather than being ignored.
//   - Context deadline or cancellation from the backend is 503 backend_error,
//     retryable (the binding's table has no 504).
//   - A body without Content-Type is read as JSON; charset is ignored.
package httpbind
