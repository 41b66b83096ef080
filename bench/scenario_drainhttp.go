package bench

// drainHTTP: the figure users compare with other queues (issue 17):
// 20,000 jobs enqueued over HTTP in batches of 100, then drained over HTTP
// by a worker that behaves like the official OJS Go SDK worker (one fetch
// for its free handler slots, one ack request per job, no-op handler),
// with 32 and with 100 handlers; raw JetStream does the same with atomic
// batches and FetchNoWait(free slots) + a confirmed ack per message.
var drainHTTP = drainScenario("drain-http",
	"--drain-jobs jobs enqueued over HTTP in batches of 100, then drained by an SDK-style worker (fetch count = free "+
		"handler slots, one ack request per job) with 32 and 100 handlers, vs raw atomic batches + FetchNoWait(free slots) + confirmed acks",
	"bench-sdk", "jetgate HTTP", (*Env).HTTPBatchDrain)
