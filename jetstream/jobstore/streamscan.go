package jobstore

import (
	"context"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// ScanStream reads the messages of stream st on filter stored at or after
// sequence from, at most max of them, and calls fn with each until fn
// returns false: the reads of ScanRecords (batched direct gets where the
// stream answers them consistently, one message get each otherwise) for a
// listing of another bucket (the workflow listing, admission/workflow).
// It writes nothing and creates no consumer.
func ScanStream(ctx context.Context, nc *nats.Conn, st jetstream.Stream, filter string, from uint64, max int,
	fn func(*jetstream.RawStreamMsg) bool) (ScanPos, error) {
	s := &Store{nc: nc} // a scan uses only the connection
	return s.scan(ctx, st, st.CachedInfo().Config.Name, filter, from, max, fn)
}
