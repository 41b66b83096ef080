// Package jetstream is the parent of jetgate's JetStream packages. It holds
// no code: each sub-package owns one thing and is named for it, so that
// files importing nats.go's "github.com/nats-io/nats.go/jetstream" never
// need an alias for ours.
//
//   - topology: names of every stream, subject, bucket and consumer (one
//     file, names.go), the escaping of queue names and keys into subject
//     tokens, and the idempotent creation of all of them.
//   - jobstore: job records (KV bucket OJS_JOBS), their compare-and-swap
//     transitions, ready messages and timers.
//   - natstest: embedded nats-server helpers for tests (one node or a
//     3-node cluster), started synchronously in a temp dir.
//   - embedded: the embedded nats-server that `jetgate serve` runs by default.
package jetstream
