// Package ojs holds the Open Job Spec types every other jetgate package
// shares: the job envelope, the eight lifecycle states and their legal
// transitions, retry policies, the enqueue/fetch/ack/nack request shapes and
// the sentinel errors that httpbind maps to HTTP status codes.
//
// It is the leaf of the dependency graph: it imports nothing of jetgate's and
// never touches NATS or HTTP, so every layer may import it. It lives under
// admission/ because admission's API is spoken in these types (the repo's
// top level is fixed to cmd, jetstream, admission, kvlimits, httpbind, bench).
package ojs
