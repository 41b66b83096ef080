package bench

// drainNATS: drain-http's workload for a Go service on NATS (issue 19):
// --drain-jobs jobs enqueued with the Go client over the NATS binding in
// batches of 100, then drained by client.Worker over NATS (fetch for its
// free slots, batch acks through ojs.v1.workers.ackbatch) with 32 and 100
// handlers; raw JetStream does the same with atomic batches and
// FetchNoWait(free slots) + a confirmed ack per message.
var drainNATS = drainScenario("drain-nats",
	"--drain-jobs jobs enqueued with the Go client over NATS in batches of 100, then drained by the Go client.Worker "+
		"over NATS (fetch for free slots, batched acks) with 32 and 100 handlers, vs raw atomic batches + FetchNoWait(free slots) + confirmed acks",
	"bench-go-nats", "jetgate NATS Go worker", (*Env).NATSWorkerDrain)
