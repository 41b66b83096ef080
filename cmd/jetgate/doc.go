// Command jetgate is an Open Job Spec (OJS) server on NATS JetStream.
//
// This package is the thin command line: main.go wires os.Args, the
// standard streams and a context cancelled by SIGINT/SIGTERM into run, and
// run dispatches to the subcommands (serve, bench, version, help), each a function
// with injected writers. serve turns flags and JETGATE_* environment
// variables (flag > variable > default) into an app.Config (every numeric
// flag has a range, bounded.go, and a value outside it stops serve before
// anything starts, naming the flag and the range), builds the slog
// logger and hands both to app.Run, which owns everything after that,
// including graceful shutdown when the context is cancelled. bench turns
// its flags into bench.Params and hands them to package bench, which
// starts its own jetgate for the run.
//
// The remote commands (jobs, enqueue, queues, limits, events, streams;
// cli*.go) talk to a running jetgate over NATS. All but streams go
// through jetgate's NATS binding (<prefix>.<area>.<op>, docs/nats.md) and
// print its answers: a table, or with --json the OJS body as the API sent
// it; an error answer is returned as "<code>: <message>" of its OJS error
// envelope, so main exits 1. events tail subscribes to the event subjects
// (ojs.events.<type>) and filters with ojs.EventQuery, as the events
// endpoint does. None of them decides anything or reads JetStream state.
//
// They send the binding's requests themselves (remote.call, a dozen lines)
// rather than through package client: --json prints the body jetgate sent,
// which the client decodes into typed values (PATCH's previous_priority,
// for one, does not survive); the listings and rate-limit operations have
// no client method; and a person at a terminal should see a 429 at once,
// not the client's producer retries and circuit breaker. The test kit
// (client/jetgatetest) and the tests use the client.
//
// streams is the operator's exception: it reads JetStream's own API, never
// jetgate's state, with github.com/nats-io/jsm.go: Manager.Streams and
// Manager.Consumers list the OJS_* streams, KV_OJS_* buckets and their
// consumers (messages, bytes, num_pending, num_ack_pending) in one paged
// request each, and monitor.CheckStreamInfoHealth (the check behind
// `nats server check stream`) judges each stream of topology.Required():
// a leader, the expected peers, none offline. What of jsm.go does not
// fit: monitor.CheckKVBucketAndKey (it checks that a bucket exists and
// optionally holds a key; the stream listing already shows every bucket's
// stream, so a second request per bucket would add nothing); monitor.CheckConsumerInfoHealth, whose
// checks all need thresholds (last delivery age, outstanding acks) that
// have no right value for jetgate's consumers: an idle queue's consumer
// is healthy with nothing delivered for hours, and num_ack_pending is the
// number of running jobs, so lag is reported, not judged; and the monitor
// package's renderers (Nagios, Prometheus text), since the report has its
// own table and JSON.
//
// Only main calls os.Exit; serve and bench start servers through app and
// bench, never here.
package main
