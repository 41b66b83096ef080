// Package httpbind speaks the OJS HTTP binding (spec/core/ojs-http-binding.md)
// for jetgate: it routes requests with gorilla/mux, decodes and validates
// their bodies, calls the Backend, and writes the binding's JSON shapes,
// headers and error envelopes.
//
// It owns:
//   - the route table of the core binding (see routes in server.go), and
//     the process probes GET /health (liveness) and GET /ready (readiness,
//     system.go);
//   - the HTTP side of the wire shapes: taking values from the path, query
//     and headers, and writing statuses and headers. The request decoders
//     and validators (strict about types, lenient about unknown fields), the
//     success bodies and the error mapping live in admission/ojs/wire,
//     shared with the NATS binding (natsbind) so that both answer alike;
//     httpbind calls them (wire.go gives them short local names);
//   - the headers every response carries (Content-Type
//     application/openjobspec+json on JSON bodies, OJS-Version, X-Request-Id),
//     the request Content-Type and OJS-Version checks, body size limits (413
//     naming the limit and the size), the check of every POST, PUT, PATCH
//     and DELETE body for text that is not UTF-8 and keys given twice
//     (wire.CheckBody, before the handler), and panic recovery;
//   - writing the single mapping from domain errors to HTTP status, OJS
//     error code and envelope (wire.Classify, written by writeError in
//     errors.go), including the 429 hook (RateLimitedError).
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
//   - Error codes follow ojs-errors.md in the binding's vocabulary: malformed
//     JSON and a job envelope that fails validation (enqueue, batch) are 400
//     invalid_payload; any other bad request (query parameters, headers,
//     fields of worker and admin bodies) is 400 invalid_request. A
//     transition from the wrong state (ack of a job that is not active,
//     cancel of a finished job) is 409 conflict, not retryable; a lost
//     compare-and-swap (ojs.ErrConflict) is 409 conflict, retryable. A
//     backpressure refusal is 429 QUEUE_FULL (ojs-backpressure.md 7.1, with
//     queue, depth, bound and strategy beside code); rate limits keep 429
//     rate_limited. Every 429 and 503 carries Retry-After (ERR-006).
//   - Every error envelope carries "hint": one sentence saying what to do.
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
//     object, the worker protocol's {type, message, backtrace}, or a string
//     or a number, taken as the message.
//   - Heartbeat ids that are not job ids are dropped before the backend.
//   - Events: "types", "queues" and "job_types" (ojs-events.md 6.4) are
//     comma-separated lists that combine; "after" answers 422 unsupported
//     rather than being ignored.
//   - Context deadline or cancellation from the backend is 503 backend_error,
//     retryable (the binding's table has no 504).
//   - A body without Content-Type is read as JSON; charset is ignored.
package httpbind
