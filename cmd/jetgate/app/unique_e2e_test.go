package app_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/jetgate/jetgate/cmd/jetgate/app"
	"github.com/jetgate/jetgate/jetstream/natstest"
)

func uniqueJob(key, onConflict string, args ...any) map[string]any {
	if args == nil {
		args = []any{}
	}
	return map[string]any{"type": "uniq.test", "args": args,
		"options": map[string]any{"queue": "uq", "unique": map[string]any{"key": key, "period_ms": 60000, "on_conflict": onConflict}}}
}

// ojs-unique-jobs.md 5.1 and 5.4 over HTTP, as the official SDKs send
// unique ({"key","period_ms","on_conflict"}): reject is 409 duplicate
// with the existing job's id in details, ignore is 200 (not 201) with the
// existing job and "deduplicated": true, replace is 201 with a new job
// and the old one cancelled; a bad policy is 400 naming the field.
func TestHTTPUniqueJobs_L4_UNIQ_001(t *testing.T) {
	t.Parallel()
	c := client{t: t, base: startApp(t, app.Config{}).URL()}
	first := obj(c.must(201, "POST", "/ojs/v1/jobs", uniqueJob("k1", "reject"))["job"])

	r := c.do("POST", "/ojs/v1/jobs", uniqueJob("k1", "reject"))
	e := wantErr(t, r, 409, "duplicate")
	if d := obj(e["details"]); d["existing_job_id"] != first["id"] || d["unique_key"] != "k1" {
		t.Fatalf("details %v, want existing_job_id %v and unique_key k1", d, first["id"])
	}

	r = c.do("POST", "/ojs/v1/jobs", uniqueJob("k1", "ignore"))
	if r.status != 200 || obj(r.body["job"])["id"] != first["id"] || r.body["deduplicated"] != true {
		t.Fatalf("ignore: status %d, want 200 with job %v: %s", r.status, first["id"], r.raw)
	}
	if s := obj(r.body["job"])["state"]; s != "available" {
		t.Fatalf("ignore: existing job state %v", s)
	}

	repl := obj(c.must(201, "POST", "/ojs/v1/jobs", uniqueJob("k1", "replace", 2))["job"])
	if repl["id"] == first["id"] {
		t.Fatal("replace answered the old job")
	}
	if s := obj(c.must(200, "GET", "/ojs/v1/jobs/"+first["id"].(string), nil)["job"])["state"]; s != "cancelled" {
		t.Fatalf("replaced job is %v, want cancelled", s)
	}

	bad := uniqueJob("k2", "overwrite")
	r = c.do("POST", "/ojs/v1/jobs", bad)
	if r.status != 400 || obj(obj(r.body["error"])["details"])["field"] != "unique.on_conflict" {
		t.Fatalf("bad on_conflict: %d %s, want 400 naming unique.on_conflict", r.status, r.raw)
	}
	r = c.do("POST", "/ojs/v1/jobs", map[string]any{"type": "uniq.test", "args": []any{},
		"options": map[string]any{"unique": map[string]any{"states": []any{"running"}}}})
	if r.status != 400 || obj(obj(r.body["error"])["details"])["field"] != "unique.states[0]" {
		t.Fatalf("bad states: %d %s, want 400 naming unique.states[0]", r.status, r.raw)
	}

	// Batch: a duplicate of an existing job refuses the whole batch (409);
	// with ignore its slot holds the existing job.
	r = c.do("POST", "/ojs/v1/jobs/batch", map[string]any{"jobs": []any{uniqueJob("k3", "reject"), uniqueJob("k1", "reject")}})
	if d := obj(wantErr(t, r, 409, "duplicate")["details"]); d["existing_job_id"] != repl["id"] {
		t.Fatalf("batch details %v, want existing_job_id %v", d, repl["id"])
	}
	b := c.must(201, "POST", "/ojs/v1/jobs/batch", map[string]any{"jobs": []any{uniqueJob("k3", "ignore"), uniqueJob("k1", "ignore")}})
	jobs := list(b["jobs"])
	if len(jobs) != 2 || obj(jobs[1])["id"] != repl["id"] || obj(jobs[0])["id"] == repl["id"] {
		t.Fatalf("batch with ignore: %v", b)
	}
	// L4-UNIQ-003 / 8.3: the manifest declares the strength.
	if m := c.must(200, "GET", "/ojs/manifest", nil); obj(m["capabilities"])["unique_jobs"] != true || m["unique_job_strength"] != "strong" {
		t.Fatalf("manifest %v, want unique_jobs true and unique_job_strength strong", m)
	}
}

// Issue 18: 16 producers racing on one key through 3 jetgate processes
// on one NATS server create exactly one job (ojs-unique-jobs.md 8.1).
func TestHTTPUniqueRace3Processes(t *testing.T) {
	t.Parallel()
	ns := natstest.RunServer(t)
	var cs []client
	for range 3 {
		cs = append(cs, client{t: t, base: startApp(t, app.Config{NatsURL: ns.ClientURL()}).URL()})
	}
	var mu sync.Mutex
	var created []string
	statuses := map[int]int{}
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range 16 {
		wg.Go(func() {
			<-start
			r := cs[i%3].do("POST", "/ojs/v1/jobs", uniqueJob("race", "reject", fmt.Sprint(i)))
			mu.Lock()
			defer mu.Unlock()
			statuses[r.status]++
			if r.status == 201 {
				created = append(created, obj(r.body["job"])["id"].(string))
			}
		})
	}
	close(start)
	wg.Wait()
	if len(created) != 1 || statuses[409] != 15 {
		t.Fatalf("statuses %v, want one 201 and fifteen 409", statuses)
	}
}
