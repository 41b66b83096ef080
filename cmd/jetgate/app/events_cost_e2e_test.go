package app_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetgate/jetgate/cmd/jetgate/app"
	"github.com/jetgate/jetgate/jetstream/natstest"
	"github.com/jetgate/jetgate/jetstream/topology"
)

// storedWrites returns the messages each stream has stored since it was
// created (its last sequence; KV buckets included), read from the server.
func storedWrites(t *testing.T, js jetstream.JetStream) map[string]uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out := map[string]uint64{}
	streams := js.ListStreams(ctx)
	for info := range streams.Info() {
		out[info.Config.Name] = info.State.LastSeq
	}
	if err := streams.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// jobCost is what n jobs cost the server: stored messages by stream, and
// messages into and out of the server (its own counters).
type jobCost struct {
	stored  map[string]uint64
	in, out int64
}

func (c jobCost) total() (n uint64) {
	for _, v := range c.stored {
		n += v
	}
	return n
}

func (c jobCost) String(jobs int) string {
	names := make([]string, 0, len(c.stored))
	for k, v := range c.stored {
		if v > 0 {
			names = append(names, k)
		}
	}
	slices.Sort(names)
	var b strings.Builder
	fmt.Fprintf(&b, "stored %.2f/job (", float64(c.total())/float64(jobs))
	for i, k := range names {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s %.2f", k, float64(c.stored[k])/float64(jobs))
	}
	fmt.Fprintf(&b, "), in %.2f/job, out %.2f/job", float64(c.in)/float64(jobs), float64(c.out)/float64(jobs))
	return b.String()
}

// runJobs enqueues n jobs one by one over HTTP, fetches them 100 at a time
// and acks each, and returns what that cost the server.
func runJobs(t *testing.T, ns *server.Server, js jetstream.JetStream, c client, queue string, n int, wantEvents bool) jobCost {
	t.Helper()
	before := storedWrites(t, js)
	vz, _ := ns.Varz(nil)
	in0, out0 := vz.InMsgs, vz.OutMsgs
	for i := range n {
		c.must(201, "POST", "/ojs/v1/jobs", map[string]any{"type": "cost.x", "args": []any{i}, "options": map[string]any{"queue": queue}})
	}
	for done := 0; done < n; {
		jobs := list(c.must(200, "POST", "/ojs/v1/workers/fetch", map[string]any{"queues": []string{queue}, "count": 100, "worker_id": "cost-1"})["jobs"])
		if len(jobs) == 0 {
			t.Fatalf("fetched %d of %d jobs", done, n)
		}
		for _, j := range jobs {
			c.must(200, "POST", "/ojs/v1/workers/ack", map[string]any{"job_id": obj(j)["id"]})
		}
		done += len(jobs)
	}
	after := storedWrites(t, js)
	if wantEvents { // the stream captures core publishes asynchronously
		for deadline := time.Now().Add(20 * time.Second); after[topology.EventStream]-before[topology.EventStream] < uint64(3*n) && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			after = storedWrites(t, js)
		}
	}
	vz, _ = ns.Varz(nil)
	cost := jobCost{stored: map[string]uint64{}, in: vz.InMsgs - in0, out: vz.OutMsgs - out0}
	for k, v := range after {
		cost.stored[k] = v - before[k]
	}
	return cost
}

// Issue 17, "events are not stored per job by default": a job's life
// (enqueue, fetch, ack over HTTP) stores no event by default, with or
// without a reader of GET /ojs/v1/events, and 3 (job.enqueued, started,
// completed) with --events-stream. The per-job cost is logged (go test
// -run TestPerJobStoredMessages -v; JETGATE_COST_JOBS sets the job count,
// default 200).
func TestPerJobStoredMessages(t *testing.T) {
	t.Parallel()
	n := 200
	if v, err := strconv.Atoi(os.Getenv("JETGATE_COST_JOBS")); err == nil && v > 0 {
		n = v
	}
	for _, mode := range []struct {
		name   string
		cfg    app.Config
		arm    bool
		events uint64 // stored events per job
	}{
		{"default", app.Config{}, false, 0},
		{"default, events read", app.Config{}, true, 0},
		{"events-stream", app.Config{EventsStream: true}, false, 3},
	} {
		t.Run(mode.name, func(t *testing.T) {
			t.Parallel()
			ns := natstest.RunServer(t)
			mode.cfg.NatsURL = ns.ClientURL()
			s := startApp(t, mode.cfg)
			c := client{t: t, base: s.URL()}
			_, js := natstest.ConnectURL(t, ns.ClientURL())
			if mode.arm {
				c.must(200, "GET", "/ojs/v1/events", nil)
			}
			runJobs(t, ns, js, c, "warm", 20, mode.events > 0) // create the queue's assets
			cost := runJobs(t, ns, js, c, "warm", n, mode.events > 0)
			t.Logf("%s, %d jobs: %s", mode.name, n, cost.String(n))
			if got := cost.stored[topology.EventStream]; got != mode.events*uint64(n) {
				t.Errorf("%s stored %d events for %d jobs, want %d per job", topology.EventStream, got, n, mode.events)
			}
			if mode.arm {
				var evs []any
				for deadline := time.Now().Add(10 * time.Second); len(evs) < min(n, 1000) && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
					evs = list(c.must(200, "GET", "/ojs/v1/events?types=job.completed&limit=1000", nil)["events"])
				}
				if len(evs) < min(n, 1000) {
					t.Errorf("the capture lists %d job.completed events of %d jobs", len(evs), n)
				}
			}
		})
	}
}
