package topology_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetgate/jetgate/jetstream/natstest"
	"github.com/jetgate/jetgate/jetstream/topology"
)

// Every queue and priority level in use has a consumer on the ready
// stream: nats-server's default limit of 1,000 consumers per stream must
// not stop the 1,001st level (4 queues of 256 levels are more), on a
// stream made by Ensure or one an older version made and Ensure updates.
func TestReadyStreamTakesManyLevelConsumers(t *testing.T) {
	s := natstest.RunServer(t)
	_, js := natstest.Connect(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// The stream as an older jetgate created it, with the server's limit.
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{
		Name: topology.ReadyStream, Subjects: []string{topology.ReadySubjects}, Retention: jetstream.WorkQueuePolicy,
	}); err != nil {
		t.Fatal(err)
	}
	assets, err := topology.Ensure(ctx, js, topology.Config{})
	if err != nil {
		t.Fatal(err)
	}
	const n = 1_010
	sem := make(chan struct{}, 16)
	errs := make(chan error, n)
	for i := range n {
		sem <- struct{}{}
		go func() {
			defer func() { <-sem }()
			queue, p := fmt.Sprintf("q%d", i/256), i%256
			_, err := assets.Ready.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{
				Durable: topology.ReadyConsumer(queue, p), FilterSubjects: topology.ReadyLevelFilters(queue, p),
				AckPolicy: jetstream.AckExplicitPolicy, MemoryStorage: true,
			})
			errs <- err
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Fatalf("level consumer: %v", err)
		}
	}
}

// Issue 20 (memory under load): the marker a finished record leaves when
// its retention ends lives RecordMarkers (at most an hour), so a short
// retention chosen to bound the server's memory is not outweighed by an
// hour of markers; Ensure applies a changed value to an existing bucket.
func TestRecordMarkersFollowConfig(t *testing.T) {
	s := natstest.RunServer(t)
	_, js := natstest.Connect(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	markers := func() time.Duration {
		t.Helper()
		st, err := js.Stream(ctx, topology.KVStream(topology.JobsBucket))
		if err != nil {
			t.Fatal(err)
		}
		return st.CachedInfo().Config.SubjectDeleteMarkerTTL
	}
	for _, tc := range []struct{ set, want time.Duration }{
		{0, time.Hour}, {5 * time.Minute, 5 * time.Minute}, {48 * time.Hour, time.Hour}, {30 * time.Second, 30 * time.Second},
	} {
		if _, err := topology.Ensure(ctx, js, topology.Config{RecordMarkers: tc.set}); err != nil {
			t.Fatal(err)
		}
		if got := markers(); got != tc.want {
			t.Fatalf("RecordMarkers %s: the jobs bucket keeps markers %s, want %s", tc.set, got, tc.want)
		}
	}
}
