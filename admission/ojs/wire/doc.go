// Package wire holds what both OJS bindings (httpbind over HTTP, natsbind
// over NATS) must do the same way, so that no rule lives in an adapter:
//
//   - the request decoders and validators: request bytes (and the values
//     HTTP takes from a path or query, which NATS bodies carry as fields)
//     to the ojs request types, with ValidationErrors that name the field
//     and the rule (DecodeFetch, DecodeAck, DecodeNack, DecodeHeartbeat,
//     DecodeJob, DecodePatch, DecodeOverride, DecodeBackpressure,
//     ParseEventQuery, ParsePage, ...);
//   - the success bodies both send (JobReply, AckReply, HeartbeatReply,
//     QueueState, PageQueues, ...);
//   - the one error mapping (STYLE 10): Classify turns any error into an
//     Error, the HTTP status (which NATS sends as Nats-Service-Error-Code),
//     the OJS error code, the envelope with its hint (Envelope) and the
//     headers that go with it (Retry-After, X-OJS-Queue-*, ...).
//
// It owns no state and makes no decision about jobs: that is admission's.
// The decoders do not depend on a transport; the error mapping speaks in
// HTTP statuses and http.Header values because the OJS error envelope and
// its status codes are defined by the HTTP binding (ojs-http-binding.md
// 16) and the NATS binding carries the same numbers. It imports net/http
// for those two types only, never for a server or client.
package wire
