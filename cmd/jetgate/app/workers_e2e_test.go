package app_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jetgate/jetgate/cmd/jetgate/app"
	"github.com/jetgate/jetgate/jetstream/natstest"
)

// eventually polls cond until it holds or within passes.
func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %s: %s", within, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func enqueueN(c client, queue string, n int) {
	c.t.Helper()
	for range n {
		c.must(201, "POST", "/ojs/v1/jobs", map[string]any{"type": "w.e2e", "args": []any{}, "options": map[string]any{"queue": queue}})
	}
}

func fetchAs(c client, worker string, count int, queues ...string) []any {
	c.t.Helper()
	return list(c.must(200, "POST", "/ojs/v1/workers/fetch", map[string]any{"queues": queues, "count": count, "worker_id": worker})["jobs"])
}

// ojs-graceful-shutdown.md 5.1 ("The backend MUST NOT assign new jobs to a
// quiet worker") and ojs-worker-protocol.md 4.2/4.4: a worker that beats
// quiet or drain gets an empty fetch while another worker gets the jobs;
// /workers/beat answers acknowledged with the state; the heartbeat answers
// the SDK's vocabulary (drain is terminate); health shows the state.
func TestHTTPQuietWorkerGetsNoJobs_GS51(t *testing.T) {
	t.Parallel()
	s := startApp(t, app.Config{})
	c := client{t: t, base: s.URL()}
	enqueueN(c, "gs", 3)

	b := c.must(200, "POST", "/ojs/v1/workers/beat", map[string]any{"worker_id": "w-quiet", "state": "running",
		"active_jobs": 0, "active_job_ids": []any{}, "hostname": "h1", "pid": 42, "queues": []any{"gs"}, "concurrency": 4})
	if b["acknowledged"] != true || b["state"] != "running" || b["worker_id"] != "w-quiet" || b["server_time"] == nil {
		t.Fatalf("beat running answered %v", b)
	}
	b = c.must(200, "POST", "/ojs/v1/workers/beat", map[string]any{"worker_id": "w-quiet", "state": "quiet", "active_jobs": 0})
	if b["acknowledged"] != true || b["state"] != "quiet" {
		t.Fatalf("beat quiet answered %v", b)
	}
	if jobs := fetchAs(c, "w-quiet", 3, "gs"); len(jobs) != 0 {
		t.Fatalf("a quiet worker was given %d jobs", len(jobs))
	}
	if jobs := fetchAs(c, "w-busy", 1, "gs"); len(jobs) != 1 {
		t.Fatalf("another worker got %d jobs, want 1", len(jobs))
	}
	h := c.must(200, "GET", "/ojs/v1/workers/w-quiet/health", nil)
	if h["state"] != "quiet" || h["ready"] != false || h["status"] != "healthy" || h["worker_id"] != "w-quiet" {
		t.Fatalf("health of the quiet worker: %v", h)
	}
	// drain (graceful shutdown 5.2): /beat says drain, the SDK heartbeat
	// says terminate; still no jobs.
	if b = c.must(200, "POST", "/ojs/v1/workers/beat", map[string]any{"worker_id": "w-quiet", "state": "drain"}); b["state"] != "drain" {
		t.Fatalf("beat drain answered %v", b)
	}
	hb := c.must(200, "POST", "/ojs/v1/workers/heartbeat", map[string]any{"worker_id": "w-quiet", "state": "drain", "active_jobs": 0, "active_job_ids": []any{}})
	if hb["state"] != "terminate" {
		t.Fatalf("heartbeat of a draining worker answered state %v, want terminate", hb["state"])
	}
	if jobs := fetchAs(c, "w-quiet", 3, "gs"); len(jobs) != 0 {
		t.Fatalf("a draining worker was given %d jobs", len(jobs))
	}
	// The SDK's heartbeat records state too: quiet from a fresh worker.
	hb = c.must(200, "POST", "/ojs/v1/workers/heartbeat", map[string]any{"worker_id": "sdk-w", "state": "quiet", "active_jobs": 0, "active_job_ids": []any{}})
	if hb["state"] != "quiet" {
		t.Fatalf("heartbeat quiet answered %v", hb)
	}
	if jobs := fetchAs(c, "sdk-w", 1, "gs"); len(jobs) != 0 {
		t.Fatalf("a worker quiet by heartbeat was given %d jobs", len(jobs))
	}
	for _, bad := range []struct {
		body  map[string]any
		field string
	}{
		{map[string]any{"worker_id": "w", "state": "sleeping"}, "state"},
		{map[string]any{"state": "running"}, "worker_id"},
		{map[string]any{"worker_id": "w", "pid": -1}, "pid"},
		{map[string]any{"worker_id": "w", "queues": []any{"Bad Queue"}}, "queues[0]"},
		{map[string]any{"worker_id": "w", "started_at": "yesterday"}, "started_at"},
		{map[string]any{"worker_id": "w", "pool": "No Pool"}, "pool"},
	} {
		for _, path := range []string{"/ojs/v1/workers/beat", "/ojs/v1/workers/heartbeat"} {
			r := c.do("POST", path, bad.body)
			if r.status != 400 || !strings.Contains(r.raw, `"`+bad.field) {
				t.Errorf("POST %s %v: %d %s, want 400 naming %s", path, bad.body, r.status, r.raw, bad.field)
			}
		}
	}
	if r := c.do("GET", "/ojs/v1/workers/nobody/health", nil); r.status != 404 {
		t.Errorf("health of an unknown worker: %d %s", r.status, r.raw)
	}
}

// The registry lives in JetStream: two jetgate processes on one NATS
// server show the same workers; a worker quiet by a beat to one gets no
// jobs from the other; an operator's directive (ojs-admin-api.md 9.3)
// given to one is answered by the other's heartbeat (ojs-worker-protocol.md
// 4.4), and a worker seen only by fetch is listed (9.1).
func TestHTTPWorkerRegistryAcrossProcesses_ADM9(t *testing.T) {
	t.Parallel()
	ns := natstest.RunServer(t)
	p1 := client{t: t, base: startApp(t, app.Config{NatsURL: ns.ClientURL(), InstanceName: "p1"}).URL()}
	p2 := client{t: t, base: startApp(t, app.Config{NatsURL: ns.ClientURL(), InstanceName: "p2"}).URL()}
	enqueueN(p1, "xq", 3)

	p1.must(200, "POST", "/ojs/v1/workers/beat", map[string]any{"worker_id": "quiet-w", "state": "quiet"})
	eventually(t, 10*time.Second, "p2 sees quiet-w quiet", func() bool {
		r := p2.do("GET", "/ojs/v1/workers/quiet-w/health", nil)
		return r.status == 200 && r.body["state"] == "quiet"
	})
	if jobs := fetchAs(p2, "quiet-w", 3, "xq"); len(jobs) != 0 {
		t.Fatalf("p2 gave a worker quiet on p1 %d jobs", len(jobs))
	}
	if jobs := fetchAs(p2, "fetch-only", 1, "xq"); len(jobs) != 1 {
		t.Fatalf("p2 gave another worker %d jobs, want 1", len(jobs))
	}

	// A worker seen only by p2's fetch is listed by p1, with last seen.
	eventually(t, 10*time.Second, "p1 lists fetch-only", func() bool {
		r := p1.do("GET", "/ojs/v1/admin/workers/fetch-only", nil)
		return r.status == 200 && r.body["last_seen_at"] != nil && r.body["state"] == "running" &&
			fmt.Sprint(r.body["queues"]) == "[xq]"
	})

	// Directive on p2, heartbeat answered by p1, at once (the heartbeat's
	// compare-and-swap reads the directive even if p1's view lags).
	d := p2.must(200, "POST", "/ojs/v1/admin/workers/fetch-only/quiet", nil)
	if d["directive"] != "quiet" || d["state"] != "quiet" {
		t.Fatalf("quiet directive answered %v", d)
	}
	hb := p1.must(200, "POST", "/ojs/v1/workers/heartbeat", map[string]any{"worker_id": "fetch-only", "state": "running", "active_jobs": 1, "active_job_ids": []any{}})
	if hb["state"] != "quiet" {
		t.Fatalf("heartbeat on p1 after quiet on p2 answered %v", hb["state"])
	}
	p1.must(200, "POST", "/ojs/v1/admin/workers/fetch-only/terminate", nil)
	hb = p2.must(200, "POST", "/ojs/v1/workers/heartbeat", map[string]any{"worker_id": "fetch-only", "state": "quiet", "active_jobs": 0})
	if hb["state"] != "terminate" {
		t.Fatalf("heartbeat on p2 after terminate on p1 answered %v", hb["state"])
	}
	// A directive only moves forward: quiet after terminate stays terminate.
	if d = p2.must(200, "POST", "/ojs/v1/admin/workers/fetch-only/quiet", nil); d["state"] != "terminate" {
		t.Fatalf("quiet after terminate: %v", d)
	}
	if r := p1.do("POST", "/ojs/v1/admin/workers/nobody/quiet", nil); r.status != 404 {
		t.Fatalf("quiet of an unknown worker: %d %s", r.status, r.raw)
	}

	// Both processes list the same workers.
	eventually(t, 10*time.Second, "both list both workers", func() bool {
		for _, c := range []client{p1, p2} {
			body := c.must(200, "GET", "/ojs/v1/admin/workers", nil)
			if len(list(body["items"])) != 2 || obj(body["pagination"])["total"] != 2.0 {
				return false
			}
		}
		return true
	})
}

// ojs-admin-api.md 9.1 (list with summary and pagination, 4.3) and 9.4
// (only a stale worker can be deregistered).
func TestHTTPAdminWorkersListAndDeregister_ADM94(t *testing.T) {
	t.Parallel()
	s := startApp(t, app.Config{DefaultHeartbeatTimeout: time.Second})
	c := client{t: t, base: s.URL()}
	for i, st := range []string{"running", "quiet", "running"} {
		c.must(200, "POST", "/ojs/v1/workers/beat", map[string]any{"worker_id": fmt.Sprintf("w%d", i), "state": st,
			"active_jobs": i, "hostname": "host", "version": "1.2.0", "metadata": map[string]any{"node": "n1"}})
	}
	body := c.must(200, "GET", "/ojs/v1/admin/workers?per_page=2", nil)
	items := list(body["items"])
	sum := obj(body["summary"])
	if len(items) != 2 || obj(body["pagination"])["total"] != 3.0 || obj(body["pagination"])["per_page"] != 2.0 ||
		sum["running"] != 2.0 || sum["quiet"] != 1.0 || sum["total"] != 3.0 {
		t.Fatalf("first page: %s", c.do("GET", "/ojs/v1/admin/workers?per_page=2", nil).raw)
	}
	w0 := obj(items[0])
	if w0["id"] != "w0" || w0["hostname"] != "host" || w0["version"] != "1.2.0" || obj(w0["metadata"])["node"] != "n1" ||
		w0["last_heartbeat_at"] == nil {
		t.Fatalf("worker item %v", w0)
	}
	if page2 := list(c.must(200, "GET", "/ojs/v1/admin/workers?page=2&per_page=2", nil)["items"]); len(page2) != 1 || obj(page2[0])["id"] != "w2" {
		t.Fatalf("second page %v", page2)
	}
	for _, q := range []string{"per_page=0", "per_page=x", "page=0", "page=x"} {
		r := c.do("GET", "/ojs/v1/admin/workers?"+q, nil)
		if field := strings.Split(q, "=")[0]; r.status != 400 || !strings.Contains(r.raw, `'`+field+`'`) && !strings.Contains(r.raw, `"`+field) {
			t.Errorf("GET ?%s: %d %s, want 400 naming %s", q, r.status, r.raw, field)
		}
	}
	// A per_page above the maximum is lowered, as on every admin listing
	// (ojs-admin-api.md 6.3: max 100).
	if p := obj(c.must(200, "GET", "/ojs/v1/admin/workers?per_page=101", nil)["pagination"]); p["per_page"] != float64(100) {
		t.Errorf("per_page=101 answered pagination %v, want per_page 100", p)
	}
	// A live worker cannot be deregistered, and asking again will not help.
	if r := c.do("DELETE", "/ojs/v1/admin/workers/w1", nil); r.status != 409 || obj(r.body["error"])["retryable"] != false {
		t.Fatalf("deregistering a live worker: %d %s", r.status, r.raw)
	}
	eventually(t, 15*time.Second, "w1 goes stale", func() bool {
		return c.must(200, "GET", "/ojs/v1/admin/workers/w1", nil)["stale"] == true
	})
	c.must(200, "DELETE", "/ojs/v1/admin/workers/w1", nil)
	if r := c.do("GET", "/ojs/v1/admin/workers/w1", nil); r.status != 404 {
		t.Fatalf("GET after deregister: %d %s", r.status, r.raw)
	}
}

// ojs-fair-scheduling.md 6.1, 7.1, 7.3, 10.1, 10.2: a pool's weights shape
// which queue its workers' fetches serve; round-robin serves every queue;
// pools list their live workers; bad pools are refused naming the field;
// scheduling stats count the dispatches of the last minute.
func TestHTTPPoolsShapeConsumption_FS(t *testing.T) {
	t.Parallel()
	s := startApp(t, app.Config{})
	c := client{t: t, base: s.URL()}
	p := c.must(200, "PUT", "/ojs/v1/admin/pools/heavy", map[string]any{"queues": []any{"pa", "pb"},
		"strategy": "weighted", "weights": map[string]any{"pa": 9, "pb": 1}, "concurrency": 20})
	if p["name"] != "heavy" || p["strategy"] != "weighted" || p["concurrency"] != 20.0 || obj(p["weights"])["pa"] != 9.0 {
		t.Fatalf("PUT pool answered %v", p)
	}
	if p = c.must(200, "PUT", "/ojs/v1/admin/pools/even", map[string]any{"queues": []any{"ra", "rb"}}); p["strategy"] != "round-robin" {
		t.Fatalf("a pool's default strategy: %v", p)
	}
	const n = 40
	enqueueN(c, "pa", n)
	enqueueN(c, "pb", n)
	enqueueN(c, "ra", n)
	enqueueN(c, "rb", n)
	// Workers join a pool by their heartbeat (6.2); their fetches list the
	// queues in the other order, with no strategy of their own.
	c.must(200, "POST", "/ojs/v1/workers/heartbeat", map[string]any{"worker_id": "hw", "pool": "heavy", "state": "running", "active_jobs": 3})
	c.must(200, "POST", "/ojs/v1/workers/heartbeat", map[string]any{"worker_id": "ew", "pool": "even", "state": "running", "active_jobs": 0})
	got := map[string]int{}
	for range n {
		for _, j := range fetchAs(c, "hw", 1, "pb", "pa") {
			got[obj(j)["queue"].(string)]++
		}
		for _, j := range fetchAs(c, "ew", 1, "rb", "ra") {
			got[obj(j)["queue"].(string)]++
		}
	}
	// Weighted 9:1 over 40 fetches: pa expected 36; strict order would
	// give pb 40. Round-robin: each expected 20.
	if got["pa"]+got["pb"] != n || got["pa"] < 26 {
		t.Errorf("pool heavy (pa:9, pb:1) served %v", got)
	}
	if got["ra"]+got["rb"] != n || got["ra"] < 5 || got["rb"] < 5 {
		t.Errorf("pool even (round-robin) served %v", got)
	}

	pools := list(c.must(200, "GET", "/ojs/v1/admin/pools", nil)["items"])
	if len(pools) != 2 || obj(pools[1])["name"] != "heavy" || obj(pools[1])["active_workers"] != 1.0 || obj(pools[1])["active_jobs"] != 3.0 {
		t.Fatalf("pool list %v", pools)
	}
	st := c.must(200, "GET", "/ojs/v1/admin/scheduling/stats", nil)
	if st["window"] != "PT1M" {
		t.Fatalf("stats %v", st)
	}
	byName := map[string]map[string]any{}
	for _, q := range list(st["queues"]) {
		byName[obj(q)["name"].(string)] = obj(q)
	}
	if byName["pa"]["dispatch_count_1m"] != float64(got["pa"]) || byName["pb"]["dispatch_count_1m"] != float64(got["pb"]) {
		t.Fatalf("dispatch counts %v, fetched %v", st, got)
	}
	if r := byName["pa"]["dispatch_ratio_1m"].(float64); r < 0.3 || r > 0.5 || byName["pa"]["active_jobs"] != float64(got["pa"]) {
		t.Fatalf("pa ratio/active %v (fetched %v of %d)", byName["pa"], got["pa"], 2*n)
	}

	for _, bad := range []struct {
		body  map[string]any
		field string
	}{
		{map[string]any{"queues": []any{"a"}, "strategy": "fifo"}, "strategy"},
		{map[string]any{"strategy": "strict"}, "queues"},
		{map[string]any{"queues": []any{"A!"}}, "queues[0]"},
		{map[string]any{"queues": []any{"a"}, "strategy": "weighted", "weights": map[string]any{"b": 2}}, "weights.b"},
		{map[string]any{"queues": []any{"a"}, "concurrency": 0}, "concurrency"},
		{map[string]any{"queues": []any{"a"}, "isolated": true}, "isolated"},
		{map[string]any{"queues": []any{"a"}, "name": "other"}, "name"},
	} {
		r := c.do("PUT", "/ojs/v1/admin/pools/bad", bad.body)
		if r.status != 400 || !strings.Contains(r.raw, `"`+bad.field) {
			t.Errorf("PUT pool %v: %d %s, want 400 naming %s", bad.body, r.status, r.raw, bad.field)
		}
	}
	c.must(200, "DELETE", "/ojs/v1/admin/pools/heavy", nil)
	if r := c.do("GET", "/ojs/v1/admin/pools/heavy", nil); r.status != 404 {
		t.Fatalf("GET a deleted pool: %d %s", r.status, r.raw)
	}
	// A worker whose declared pool is gone (or never was) still fetches,
	// by its own queues.
	eventually(t, 10*time.Second, "hw fetches without its deleted pool", func() bool {
		return len(fetchAs(c, "hw", 1, "pb", "pa")) == 1
	})
	c.must(200, "POST", "/ojs/v1/workers/heartbeat", map[string]any{"worker_id": "nw", "pool": "no-such-pool", "active_jobs": 0})
	if jobs := fetchAs(c, "nw", 1, "pb", "pa"); len(jobs) != 1 {
		t.Fatalf("a worker of an unknown pool got %d jobs", len(jobs))
	}
}
