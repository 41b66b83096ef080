package jobstore_test

// Issue 17, "Batches": the all-or-nothing batch enqueue costs one atomic
// JetStream batch (ADR-50), and the target is 30k jobs/s for batches of
// 100. These benchmarks compare, on the ready stream's configuration with
// per-job subjects and 700-byte jobs, an atomic batch of 100 ready
// messages with the scheme that could replace it: the 100 messages
// published pipelined (not atomic), then one commit marker stored after
// all of them; a message counts only once its batch's marker exists, so a
// failed batch leaves messages no one may claim. ns/op is per batch;
// jobs/s is the figure to compare. Run with
//
//	go test -run '^$' -bench BatchAllOrNothing -benchtime 2s ./jetstream/jobstore/

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/jetgate/jetgate/jetstream/natstest"
)

func BenchmarkBatchAllOrNothing(b *testing.B) {
	s := natstest.RunServer(b)
	nc, js := natstest.Connect(b, s)
	ajs, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(4096))
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{
		Name: "BREADY", Subjects: []string{"bready.>"}, Retention: jetstream.WorkQueuePolicy,
		Storage: jetstream.FileStorage, AllowAtomicPublish: true, Duplicates: 2 * time.Minute,
	}); err != nil {
		b.Fatal(err)
	}
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{
		Name: "BCOMMIT", Subjects: []string{"bcommit.>"}, Storage: jetstream.FileStorage, MaxMsgsPerSubject: 1,
	}); err != nil {
		b.Fatal(err)
	}
	body := make([]byte, 700)
	for i := range body {
		body[i] = 'x'
	}
	const size = 100
	msgs := func() []*nats.Msg {
		out := make([]*nats.Msg, size)
		for i := range out {
			id := uuid.Must(uuid.NewV7()).String()
			m := nats.NewMsg(fmt.Sprintf("bready.q.%03d.%s", i%3, id))
			m.Data = body
			m.Header.Set(jetstream.MsgIDHeader, id)
			out[i] = m
		}
		return out
	}
	report := func(b *testing.B, start time.Time) {
		b.ReportMetric(float64(b.N*size)/time.Since(start).Seconds(), "jobs/s")
	}
	b.Run("atomic", func(b *testing.B) {
		start := time.Now()
		for range b.N {
			batch := msgs()
			id := nuid.Next()
			for i, m := range batch {
				m.Header.Set("Nats-Batch-Id", id)
				m.Header.Set("Nats-Batch-Sequence", strconv.Itoa(i+1))
				switch i {
				case 0:
					if _, err := nc.RequestMsg(m, 5*time.Second); err != nil {
						b.Fatal(err)
					}
				case size - 1:
					m.Header.Set("Nats-Batch-Commit", "1")
					r, err := nc.RequestMsg(m, 5*time.Second)
					if err != nil {
						b.Fatal(err)
					}
					if len(r.Data) == 0 || r.Data[0] != '{' || string(r.Data[:10]) == `{"error":{` {
						b.Fatalf("commit: %s", r.Data)
					}
				default:
					if err := nc.PublishMsg(m); err != nil {
						b.Fatal(err)
					}
				}
			}
		}
		report(b, start)
	})
	b.Run("pipelined+commit", func(b *testing.B) {
		start := time.Now()
		for range b.N {
			batch := msgs()
			id := nuid.Next()
			futures := make([]jetstream.PubAckFuture, 0, size)
			for _, m := range batch {
				m.Header.Set("Ojs-Batch", id)
				f, err := ajs.PublishMsgAsync(m)
				if err != nil {
					b.Fatal(err)
				}
				futures = append(futures, f)
			}
			for _, f := range futures {
				select {
				case <-f.Ok():
				case err := <-f.Err():
					b.Fatal(err)
				}
			}
			if _, err := js.Publish(ctx, "bcommit."+id, nil); err != nil {
				b.Fatal(err)
			}
		}
		report(b, start)
	})
}
