package jobstore_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetgate/jetgate/jetstream/jobstore"
	"github.com/jetgate/jetgate/jetstream/topology"
)

// PullNoWait hands out what a level consumer can deliver now, in stream
// order, ends at once when that is less than asked, and its messages
// settle like any JetStream message: an ack removes one, a Nak puts it
// back first in line, a second ack is refused.
func TestPullNoWait(t *testing.T) {
	ctx, nc, js, assets := setupStore(t)
	st := jobstore.New(nc, js, assets)
	consumer := func(queue string, p int) string {
		name := topology.ReadyConsumer(queue, p)
		_, err := assets.Ready.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{
			Durable: name, FilterSubjects: topology.ReadyLevelFilters(queue, p), AckPolicy: jetstream.AckExplicitPolicy, AckWait: time.Minute,
		})
		if err != nil {
			t.Fatal(err)
		}
		return name
	}
	pull := func(name string, n int) []jetstream.Msg {
		t.Helper()
		msgs, err := st.PullNoWait(ctx, name, n)
		if err != nil {
			t.Fatalf("pull %d from %s: %v", n, name, err)
		}
		return msgs
	}
	a := consumer("q", 1)
	if got := pull(a, 5); len(got) != 0 {
		t.Fatalf("empty level gave %d messages", len(got))
	}
	var seqs []uint64
	for i := range 5 {
		ack, err := js.Publish(ctx, topology.ReadySubject("q", 1, fmt.Sprint("j", i)), fmt.Appendf(nil, "m%d", i))
		if err != nil {
			t.Fatal(err)
		}
		seqs = append(seqs, ack.Sequence)
	}
	// A no-wait pull answers from the consumer's pending count, which the
	// server updates asynchronously: right after the publishes it may
	// still read zero.
	var got []jetstream.Msg
	for i := 0; len(got) == 0 && i < 200; i++ {
		if got = pull(a, 2); len(got) == 0 {
			time.Sleep(10 * time.Millisecond)
		}
	}
	if len(got) != 2 || string(got[0].Data()) != "m0" || string(got[1].Data()) != "m1" {
		t.Fatalf("pull 2 of 5: %d messages", len(got))
	}
	md, err := got[1].Metadata()
	if err != nil || md.Sequence.Stream != seqs[1] || md.Consumer != a || md.Stream != topology.ReadyStream || md.NumDelivered != 1 {
		t.Fatalf("metadata %+v, %v; want stream seq %d of %s", md, err, seqs[1], a)
	}
	if got[0].Subject() != topology.ReadySubject("q", 1, "j0") {
		t.Fatalf("subject %q", got[0].Subject())
	}
	if err := got[0].Ack(); err != nil {
		t.Fatal(err)
	}
	if err := got[0].Ack(); !errors.Is(err, jetstream.ErrMsgAlreadyAckd) {
		t.Fatalf("second ack: %v", err)
	}
	if err := got[1].Nak(); err != nil {
		t.Fatal(err)
	}
	// Fewer than asked: the pull ends without waiting for more. The Nak'd
	// message comes again once the server took the Nak in (asynchronously).
	var rest []jetstream.Msg
	for i := 0; len(rest) < 4; i++ {
		if i == 100 {
			t.Fatalf("after the nak, %d of 4 messages came", len(rest))
		}
		start := time.Now()
		rest = append(rest, pull(a, 10)...)
		if d := time.Since(start); d > 2*time.Second {
			t.Fatalf("a short pull waited %s", d)
		}
		time.Sleep(5 * time.Millisecond)
	}
	redelivered := 0
	for _, m := range rest {
		if md, _ := m.Metadata(); string(m.Data()) == "m1" && md.NumDelivered == 2 {
			redelivered++
		}
	}
	if len(rest) != 4 || redelivered != 1 {
		t.Fatalf("after the nak: %d messages, m1 redelivered %d times", len(rest), redelivered)
	}
	for _, m := range rest {
		if err := m.DoubleAck(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if info, err := assets.Ready.Info(ctx); err != nil || info.State.Msgs != 0 {
		t.Fatalf("after acks the stream holds %v (%v)", info.State.Msgs, err)
	}
	// Pulls on different consumers run at once and each gets its own.
	const levels = 8
	names := make([]string, levels)
	for p := range levels {
		names[p] = consumer("c", p)
		for i := range 3 {
			if _, err := js.Publish(ctx, topology.ReadySubject("c", p, fmt.Sprint(p, "-", i)), fmt.Appendf(nil, "%d/%d", p, i)); err != nil {
				t.Fatal(err)
			}
		}
	}
	errs := make(chan error, levels)
	for p := range levels {
		go func() {
			var msgs []jetstream.Msg
			var err error
			for i := 0; err == nil && len(msgs) < 3 && i < 200; i++ {
				var got []jetstream.Msg
				got, err = st.PullNoWait(ctx, names[p], 3-len(msgs))
				msgs = append(msgs, got...)
				if len(got) == 0 {
					time.Sleep(10 * time.Millisecond)
				}
			}
			if err == nil && len(msgs) != 3 {
				err = fmt.Errorf("level %d: %d messages", p, len(msgs))
			}
			for i, m := range msgs {
				if want := fmt.Sprintf("%d/%d", p, i); err == nil && string(m.Data()) != want {
					err = fmt.Errorf("level %d got %q, want %q", p, m.Data(), want)
				}
			}
			errs <- err
		}()
	}
	for range levels {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	// A consumer that does not exist is an error, not an empty level.
	if _, err := st.PullNoWait(ctx, topology.ReadyConsumer("nobody", 0), 1); err == nil {
		t.Fatal("pull from a missing consumer succeeded")
	}
}
