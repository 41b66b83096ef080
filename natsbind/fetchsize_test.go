package natsbind_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jetgate/jetgate/cmd/jetgate/app"
)

// fetchBig fetches up to count jobs of queue over NATS, waiting up to
// waitMs for them, and returns their ids; the reply must fit max_payload.
func (f *fixture) fetchBig(queue string, count, waitMs int) []string {
	f.t.Helper()
	a := f.natsWithin("workers.fetch", map[string]any{"queues": []string{queue}, "count": count, "wait_ms": waitMs,
		"worker_id": "big-worker"}, 20*time.Second).must(f.t, "fetch")
	if mp := f.nc.MaxPayload(); int64(len(a.raw)) > mp {
		f.t.Fatalf("a fetch reply of %d bytes, over max_payload %d", len(a.raw), mp)
	}
	var ids []string
	for _, j := range list(a.body["jobs"]) {
		ids = append(ids, obj(j)["id"].(string))
	}
	return ids
}

// state is the state of job id, read over HTTP.
func (f *fixture) state(id string) string {
	f.t.Helper()
	a := f.http("GET", "/ojs/v1/jobs/"+id, nil).must(f.t, "get job")
	s, _ := obj(a.body["job"])["state"].(string)
	return s
}

// Issue 31: a workers.fetch of many large jobs answers as many as its
// reply can carry within the server's max_payload, and claims no more:
// the jobs left out stay available (not active until their lease
// expires), and the next fetch gets them at once. Both when the ready
// messages carry their jobs (first attempts) and when they do not
// (retries, whose size is known only from their records); a waiting fetch
// (wait_ms) answers as soon as its reply is full.
func TestIssue31NatsFetchStopsAtMaxPayload(t *testing.T) {
	t.Parallel()
	f := setup(t, app.Config{})
	const n, size = 10, 300_000
	fits := int((f.nc.MaxPayload() - 1024) / (size + 400)) // each job's JSON is its args and ~400 bytes
	if fits < 2 || fits >= n {
		t.Fatalf("max_payload %d holds %d jobs of %d bytes: pick other sizes", f.nc.MaxPayload(), fits, size)
	}
	enqueued := map[string]bool{}
	for i := range n {
		a := f.nats("jobs.enqueue", map[string]any{"type": "big.job", "queue": "bigfetch",
			"args":  []any{fmt.Sprintf("%02d", i) + strings.Repeat("b", size)},
			"retry": map[string]any{"max_attempts": 5, "initial_interval": "PT0.001S", "backoff_type": "none", "jitter": false}}).must(t, "enqueue")
		enqueued[obj(a.body["job"])["id"].(string)] = true
	}
	for _, phase := range []string{"first attempts", "retries"} {
		seen := map[string]bool{}
		for call := 1; len(seen) < n; call++ {
			if call > 3 {
				t.Fatalf("%s: after %d fetches %d of %d jobs were answered", phase, call-1, len(seen), n)
			}
			// The first fetch waits (wait_ms): it must answer once full,
			// within the request's timeout of 20 s.
			ids := f.fetchBig("bigfetch", n, map[bool]int{true: 30_000, false: 0}[call == 1])
			if len(ids) == 0 || len(ids) > fits {
				t.Fatalf("%s, fetch %d: %d jobs, want 1..%d", phase, call, len(ids), fits)
			}
			for _, id := range ids {
				if !enqueued[id] || seen[id] {
					t.Fatalf("%s, fetch %d: job %s unknown or answered twice", phase, call, id)
				}
				seen[id] = true
			}
			// Those not answered are available, not claimed.
			for id := range enqueued {
				if st := f.state(id); !seen[id] && st != "available" || seen[id] && st != "active" {
					t.Fatalf("%s, after fetch %d: job %s is %s (answered: %v)", phase, call, id, st, seen[id])
				}
			}
		}
		if phase == "retries" {
			break
		}
		// Fail each once: their retries' ready messages carry no job.
		for id := range enqueued {
			a := f.nats("workers.nack", map[string]any{"job_id": id,
				"error": map[string]any{"code": "again", "message": "again", "retryable": true}}).must(t, "nack")
			if a.body["state"] != "retryable" && a.body["state"] != "available" {
				t.Fatalf("nack %s: %s", id, a.raw)
			}
		}
		deadline := time.Now().Add(30 * time.Second)
		for id := range enqueued {
			for f.state(id) != "available" {
				if time.Now().After(deadline) {
					t.Fatalf("job %s not available again after its nack: %s", id, f.state(id))
				}
				time.Sleep(20 * time.Millisecond)
			}
		}
	}
}
