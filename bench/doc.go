// Package bench measures jetgate end to end against raw JetStream on the
// same embedded nats-server, in the same process and the same run, so the
// numbers that matter are ratios, not absolute rates (STYLE 15, DESIGN
// "Speed"). It has no production code: everything lives in _test files and
// `go test ./...` only runs a few quick checks of the workloads.
//
// # What is measured
//
// A round trip is one job's life: enqueue → fetch → ack. Every path runs
// the same shape: P producer goroutines and W worker goroutines (default 8
// and 32) running at once over N jobs, each job acked exactly once.
// Workers take one job at a time, as the OJS clients do, and sleep 1 ms
// after an empty fetch. The clock runs from the first enqueue to the last
// ack; the run fails unless every job index was completed exactly once
// (and, for jetgate, N distinct job ids were acked).
//
//   - raw: the baseline. A WorkQueue stream BENCH_RAW (file storage,
//     subjects bench.raw.>, 200-byte messages) with a durable pull consumer
//     per run. Producers publish synchronously (js.Publish waits for the
//     stored ack, as an enqueue request does); workers FetchNoWait(1) +
//     Ack, then the connection is flushed so every ack reached the server.
//   - raw_async: the same with pipelined PublishAsync, for context: how far
//     publishing alone can go.
//   - raw_batch: the same with FetchNoWait(10), for context: the cost of
//     fetching one message at a time.
//   - go: the admission service in-process (app.Server.Service()):
//     Enqueue(ojs.ParseJob(body)), Fetch(count 1), Ack, with bodies of
//     about 200 bytes on a queue of their own.
//   - http: the HTTP binding as a client in another language would use it:
//     POST /ojs/v1/jobs, /ojs/v1/workers/fetch and /ojs/v1/workers/ack over
//     keep-alive connections.
//
// jetgate and its embedded nats-server run in the test process, and so do
// the clients: a profile shows the server-side cost of every path, and
// allocs/op counts client, jetgate and nats-server together.
//
// # Running
//
// The ratios the issue sets targets for (go ≥ 0.35, http ≥ 0.20 of raw),
// all paths once per iteration on BENCH_JOBS jobs, one line per run:
//
//	go test -run '^$' -bench '^BenchmarkRatio$' -benchtime 1x -count 3 ./bench
//
// Per-path numbers for benchstat, b.N jobs per path (jobs/s, fetches/job,
// empty/job, B/op and allocs/op per job):
//
//	go test -run '^$' -bench RoundTrip -benchtime 20000x ./bench
//
// Where the time goes in one path (the embedded server included):
//
//	go test -run '^$' -bench 'RoundTrip/go$' -benchtime 20000x -cpuprofile cpu.out ./bench
//	go tool pprof -top -nodecount 40 bench.test cpu.out
//
// The shape is set by flags after -args (-bench.producers, -bench.workers,
// -bench.jobs, -bench.timeout) or by the environment variables
// BENCH_PRODUCERS, BENCH_WORKERS, BENCH_JOBS (default 20000) and
// BENCH_TIMEOUT (default 5m, per path run).
//
// # Reading the numbers
//
// go_ratio and http_ratio are jetgate's jobs/s over raw's in the same
// process and run (BenchmarkRatio runs raw first and again last and
// takes the faster, see its comment); absolute rates move with the machine and whatever else
// runs on it, ratios much less. On a shared machine run -count 3 or more
// and compare medians. fetches/job above 1 and empty/job show how
// much of a path's work is workers polling an empty queue: producers
// rather than workers then set the pace. raw_async and raw_batch are not
// baselines for a ratio; they bound what pipelining could win.
package bench
