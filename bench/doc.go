// Package bench measures jetgate end to end against raw JetStream on the
// same NATS server, in the same process and the same run, so the numbers
// that matter are ratios, not absolute rates (STYLE 15, DESIGN "Speed").
// `jetgate bench` runs it; the go test -bench functions beside it are thin
// wrappers over the same workloads.
//
// # What is measured
//
// A round trip is one job's life: enqueue → fetch → ack. Every round-trip
// workload has the same shape (Shape): producer and worker goroutines
// running at once, either for a job count or for a duration, each job
// acked exactly once. Workers take one job at a time, as the OJS clients
// do, and sleep 1 ms after an empty fetch. Producers hold back while more
// than MaxBacklog jobs are enqueued and not yet acked, so neither side runs
// against a deep backlog (Fetch(1) on a deep file-stored WorkQueue stream
// collapses, DESIGN "Speed") and a time-boxed run drains in moments. The
// clock runs from the first enqueue to the last ack; a run fails unless
// every job enqueued was completed exactly once (and, for jetgate, as
// many distinct job ids were acked).
//
//   - raw (Env.RawRoundTrip): the baseline. A WorkQueue stream BENCH_RAW
//     (file storage, subjects bench.raw.>) with a durable pull consumer
//     per run. Producers publish synchronously (js.Publish waits for the
//     stored ack, as an enqueue request does); workers FetchNoWait(1) +
//     Ack, then the connection is flushed so every ack reached the server.
//   - go (Env.GoRoundTrip): the admission service in-process
//     (app.Server.Service()): Enqueue(ojs.ParseJob(body)), Fetch(count 1),
//     Ack, on a queue of its own.
//   - http (Env.HTTPRoundTrip): the HTTP binding as a client in another
//     language would use it: POST /ojs/v1/jobs, /ojs/v1/workers/fetch and
//     /ojs/v1/workers/ack over keep-alive connections.
//
// jetgate, its embedded nats-server and the clients share the process: a
// profile shows the server-side cost of every path, and allocs/op counts
// them all together.
//
// # Per-job cost and the SDK-style drain
//
// The cost scenario counts instead of timing: around each run of
// Params.CostJobs jobs it reads the NATS server's own monitoring counters
// (counters.go): Varz for messages and bytes in and out, Jsz with streams
// for every stream's state. Stored messages are the growth of each
// stream's last sequence, so streams that remove messages again
// (work-queue retention, KV buckets keeping one revision) still count
// every write; removals are writes minus the growth of the stream's
// message count. CPU is the whole process's (getrusage: jetgate, the bench
// clients and, when embedded, the nats-server). With --nats-url the server
// is another process: its counters come from its monitoring port
// (--nats-monitor: /varz, /jsz?streams=true) and its CPU from
// /proc/<pid>/stat (--nats-pid) or, failing that, from /varz's cpu
// integrated once a second; a jetgate started apart (--url) has its CPU
// read from /proc too (--jetgate-pid), apart from the bench clients'. Before and after a run the counters must
// settle (no write and no message in for two polls 100 ms apart), so
// writes no answer waited for are counted too. The embedded server is
// read in-process (app.Server.Embedded).
//
// drain-http is the figure users compare with other queues: Params.DrainJobs
// jobs enqueued over HTTP in batches of 100 by one producer, then drained by
// a worker that behaves like the official OJS Go SDK worker (sdkDrain): one
// fetch loop asking for as many jobs as it has free handler slots (waiting
// while none is free, sleeping the SDK's 1 s poll interval after an empty
// answer), a goroutine per job whose no-op handler acks it with a request
// of its own; 32 and 100 handlers. The raw baseline stores the messages in
// atomic batches of 100 and drains them with the same worker over
// FetchNoWait(free slots) and DoubleAck. Both workers run in processes of
// their own (workerproc.go), as deployed workers do.
//
// # Scenarios
//
// A Scenario is a few Cases; a Case compares two Sides on one workload:
// usually raw JetStream and jetgate, and where the question is what a
// feature costs (a rate limit, a queue bound, priority levels), jetgate
// without the feature and jetgate with it — the report names both sides.
// Run gives each case a warm-up round, then Params.Rounds rounds in which
// both sides run back to back, the baseline first in even rounds and
// jetgate first in odd ones. It reports each metric's median and range
// per side and the median of the per-round ratios jetgate/baseline, which
// holds on a noisy machine far better than absolute rates. Nothing fails
// for being slow: only errors (a job lost or acked twice, a request that
// failed) stop a run.
//
// Adding a scenario takes one self-contained file, scenario_<name>.go,
// declaring a *Scenario (its cases and sides, built from Env's workloads
// or its own), and one line in registry.go. The harness test runs every
// registered scenario at tiny sizes, so a new one is covered at once.
//
// # Running
//
//	jetgate bench                      # every scenario, report in bench-results/<time>/
//	jetgate bench roundtrip latency    # some of them
//	jetgate bench cost drain-http      # per-job cost and the SDK-style drain
//	jetgate bench --nats-url nats://127.0.0.1:4222 \
//	    --nats-monitor http://127.0.0.1:8222 --nats-pid 1234 cost
//
// The go test -bench functions, for benchstat and profiles:
//
//	go test -run '^$' -bench '^BenchmarkRatio$' -benchtime 1x -count 3 ./bench
//	go test -run '^$' -bench RoundTrip -benchtime 20000x ./bench
//	go test -run '^$' -bench 'RoundTrip/go$' -benchtime 20000x -cpuprofile cpu.out ./bench
//	go tool pprof -top -nodecount 40 bench.test cpu.out
//
// Their shape is set by flags after -args (-bench.producers,
// -bench.workers, -bench.jobs, -bench.timeout) or by the environment
// variables BENCH_PRODUCERS, BENCH_WORKERS, BENCH_JOBS (default 20000) and
// BENCH_TIMEOUT (default 5m, per path run).
//
// This package never runs in a server: it only starts one, in-process,
// for as long as a run lasts, and Env.Close removes what it created.
package bench
