package jobstore_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"
	"go.uber.org/goleak"

	"github.com/jetgate/jetgate/jetstream/jobstore"
	"github.com/jetgate/jetgate/jetstream/natstest"
	"github.com/jetgate/jetgate/jetstream/topology"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// ReadyLevels answers with a batched direct get on a single server and
// with stream info otherwise; both must list exactly the levels of the
// queue that hold messages, whatever else the stream holds.
func TestReadyLevels(t *testing.T) {
	ctx, nc, js, assets := setupStore(t)
	if !assets.Ready.CachedInfo().Config.AllowDirect {
		t.Fatal("ready stream of a single server without direct gets")
	}
	infoJS, _ := jetstream.New(nc)
	infoStream, err := infoJS.Stream(ctx, topology.ReadyStream)
	if err != nil {
		t.Fatal(err)
	}
	cfg := infoStream.CachedInfo().Config
	cfg.AllowDirect = false
	// A second view of the same stream whose cached config has direct
	// gets off: the stream info path.
	infoView := &topology.Assets{Ready: staticInfo{infoStream, cfg}}
	direct := jobstore.New(nc, js, assets)
	byInfo := jobstore.New(nc, js, infoView)

	check := func(queue string, want []int) {
		t.Helper()
		for name, st := range map[string]*jobstore.Store{"direct": direct, "info": byInfo} {
			got, _, err := st.ReadyLevels(ctx, queue)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if !slices.Equal(got, want) && !(len(got) == 0 && len(want) == 0) {
				t.Fatalf("%s: levels of %s = %v, want %v", name, queue, got, want)
			}
		}
	}
	check("empty", nil)
	pub := func(queue string, p int) uint64 {
		ack, err := js.Publish(ctx, topology.ReadySubject(queue, p, nuid.Next()), nil)
		if err != nil {
			t.Fatal(err)
		}
		return ack.Sequence
	}
	var want []int
	for p := 999; p >= 0; p -= 7 {
		pub("q", p)
		want = append(want, p)
	}
	pub("q", 3)
	pub("q.b", 1) // another queue, whose escaped name starts like q's
	pub("other", 0)
	want = append(want, 3)
	slices.Sort(want)
	check("q", want)
	check("q.b", []int{1})
	// Removing the only message of a level removes the level.
	seq := pub("q", 998)
	check("q", slices.Sorted(slices.Values(append(slices.Clone(want), 998))))
	if err := assets.Ready.DeleteMsg(ctx, seq); err != nil {
		t.Fatal(err)
	}
	check("q", want)
	// A queue with many levels is looked up by stream info, and by a
	// batched direct get again once it holds few: the answer stays exact
	// across both switches.
	var seqs []uint64
	for p := range 40 {
		seqs = append(seqs, pub("sw", p))
	}
	check("sw", slices.Collect(func(yield func(int) bool) {
		for p := range 40 {
			if !yield(p) {
				return
			}
		}
	}))
	for _, seq := range seqs[:37] {
		if err := assets.Ready.DeleteMsg(ctx, seq); err != nil {
			t.Fatal(err)
		}
	}
	check("sw", []int{37, 38, 39})
	pub("sw", 5)
	check("sw", []int{5, 37, 38, 39})
	// Many concurrent lookups each get their own answer.
	errs := make(chan error, 50)
	for i := range 50 {
		go func() {
			q, w := "q", want
			if i%2 == 1 {
				q, w = "q.b", []int{1}
			}
			got, _, err := direct.ReadyLevels(ctx, q)
			if err == nil && !slices.Equal(got, w) {
				err = fmt.Errorf("levels of %s = %v, want %v", q, got, w)
			}
			errs <- err
		}()
	}
	for range 50 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

// setupStore runs a server with jetgate's streams and buckets.
func setupStore(t *testing.T) (context.Context, *nats.Conn, jetstream.JetStream, *topology.Assets) {
	t.Helper()
	s := natstest.RunServer(t)
	nc, js := natstest.Connect(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	assets, err := topology.Ensure(ctx, js, topology.Config{})
	if err != nil {
		t.Fatal(err)
	}
	return ctx, nc, js, assets
}

// staticInfo is a stream whose cached config is cfg.
type staticInfo struct {
	jetstream.Stream
	cfg jetstream.StreamConfig
}

func (s staticInfo) CachedInfo() *jetstream.StreamInfo {
	return &jetstream.StreamInfo{Config: s.cfg}
}

// ReadyArrivals lists, per level, the messages of one queue stored after a
// sequence: all of them (complete) up to max, with the highest sequence it
// covers; more than max is incomplete. Without trusted direct gets it
// declines (ok false).
func TestReadyArrivals(t *testing.T) {
	ctx, nc, js, assets := setupStore(t)
	st := jobstore.New(nc, js, assets)
	pub := func(queue string, p int) uint64 {
		ack, err := js.Publish(ctx, topology.ReadySubject(queue, p, nuid.Next()), nil)
		if err != nil {
			t.Fatal(err)
		}
		return ack.Sequence
	}
	base := pub("q", 9)
	got, last, complete, ok, err := st.ReadyArrivals(ctx, "q", base, 10)
	if err != nil || !ok || !complete || len(got) != 0 || last != base {
		t.Fatalf("nothing arrived: %v last %d complete %v ok %v err %v", got, last, complete, ok, err)
	}
	pub("q", 3)
	pub("other", 1)
	pub("q.b", 0) // another queue, whose escaped name starts like q's
	pub("q", 200)
	top := pub("q", 3)
	got, last, complete, ok, err = st.ReadyArrivals(ctx, "q", base, 10)
	if err != nil || !ok || !complete || last != top || len(got) != 2 || got[3] != 2 || got[200] != 1 {
		t.Fatalf("arrivals %v last %d (want %d) complete %v ok %v err %v", got, last, top, complete, ok, err)
	}
	if _, _, complete, _, err = st.ReadyArrivals(ctx, "q", base, 2); err != nil || complete {
		t.Fatalf("3 arrivals asked 2 at most: complete %v err %v", complete, err)
	}
	infoStream, err := js.Stream(ctx, topology.ReadyStream)
	if err != nil {
		t.Fatal(err)
	}
	cfg := infoStream.CachedInfo().Config
	cfg.AllowDirect = false
	byInfo := jobstore.New(nc, js, &topology.Assets{Ready: staticInfo{infoStream, cfg}})
	if _, _, _, ok, _ := byInfo.ReadyArrivals(ctx, "q", base, 10); ok {
		t.Fatal("arrivals answered without trusted direct gets")
	}
}
