package topology

// Required lists the JetStream streams jetgate cannot serve without: the
// streams behind the KV buckets and the streams Ensure creates, by their
// stream names (a bucket B is stream "KV_B"). Streams created on demand
// (a bounded queue's depth stream, the overdraft and blocked streams) and
// the event stream (owned by jetstream/events) are not listed.
func Required() []string {
	out := make([]string, 0, 16)
	for _, b := range []string{JobsBucket, QueuesBucket, DeadBucket, LimitsBucket, GroupsBucket, WorkersBucket, UniqueBucket, CronBucket, WorkflowsBucket, BatchesBucket, LeasesBucket} {
		out = append(out, KVStream(b))
	}
	return append(out, ReadyStream, WaitStream, TimerStream, CronStream, CountStream, StatStream, WorkflowTimerStream)
}

// KVStream returns the name of the stream that backs a KV bucket.
func KVStream(bucket string) string { return "KV_" + bucket }
