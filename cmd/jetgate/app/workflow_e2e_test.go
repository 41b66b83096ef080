package app_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jetgate/jetgate/cmd/jetgate/app"
	"github.com/jetgate/jetgate/jetstream/natstest"
)

func wfJob(queue string, args ...any) map[string]any {
	if args == nil {
		args = []any{}
	}
	return map[string]any{"type": "wf.test", "args": args, "options": map[string]any{"queue": queue}}
}

// waitWorkflow polls GET /ojs/v1/workflows/{id} until its state is want.
func waitWorkflow(c client, id, want string) map[string]any {
	c.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		w := obj(c.must(200, "GET", "/ojs/v1/workflows/"+id, nil)["workflow"])
		if w["state"] == want {
			return w
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("workflow %s is %v, want %s within 30s: %v", id, w["state"], want, w)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func ackJob(c client, j map[string]any, result any) {
	c.t.Helper()
	c.must(200, "POST", "/ojs/v1/workers/ack", map[string]any{"job_id": j["id"], "result": result})
}

// ojs-conformance.md L3-001 (L3-CHAIN-001, -002, L3-DATA-001) over HTTP:
// the conformance body (a chain given as jobs) is 201 with a running (issue 32)
// chain; each step runs after its predecessor with its result in
// parent_results; the chain completes. The manifest declares workflows.
func TestHTTPWorkflowChain_L3_001(t *testing.T) {
	t.Parallel()
	c := client{t: t, base: startApp(t, app.Config{}).URL()}
	r := c.do("POST", "/ojs/v1/workflows", map[string]any{"type": "chain", "name": "etl",
		"jobs": []any{wfJob("wfc", "step1_output"), wfJob("wfc"), wfJob("wfc")}})
	if r.status != 201 {
		t.Fatalf("create: %d %s", r.status, r.raw)
	}
	w := obj(r.body["workflow"])
	id, _ := w["id"].(string)
	if id == "" || w["type"] != "chain" || w["state"] != "running" || r.header.Get("Location") != "/ojs/v1/workflows/"+id {
		t.Fatalf("created %v, Location %q", w, r.header.Get("Location"))
	}
	if s := obj(list(w["steps"])[1]); s["state"] != "pending" || s["job_id"] != nil {
		t.Fatalf("second step at create %v", s)
	}
	first := waitFetch(c, 10*time.Second, "wfc")
	if fetchOne(c, "wfc") != nil {
		t.Fatal("the second step ran before the first completed")
	}
	ackJob(c, first, map[string]any{"out": "step1_output"})
	second := waitFetch(c, 10*time.Second, "wfc")
	if pr, _ := json.Marshal(second["parent_results"]); string(pr) != `[{"out":"step1_output"}]` || second["workflow_id"] != id {
		t.Fatalf("second step %v", second)
	}
	ackJob(c, second, map[string]any{"out": 2})
	ackJob(c, waitFetch(c, 10*time.Second, "wfc"), map[string]any{"out": 3})
	done := waitWorkflow(c, id, "completed")
	if done["steps_completed"] != float64(3) || done["steps_total"] != float64(3) {
		t.Fatalf("completed %v", done)
	}
	// Levels 2 and 3 are served (cron, workflows), so the manifest
	// declares level 3 (ojs-conformance.md 4.2).
	if m := c.must(200, "GET", "/ojs/manifest", nil); obj(m["capabilities"])["workflows"] != true || m["conformance_level"] != float64(3) {
		t.Fatalf("manifest capabilities %v, level %v: want workflows true, level 3", m["capabilities"], m["conformance_level"])
	}
}

// ojs-conformance.md L3-002 (L3-GROUP-001, -002): a group's jobs run at
// once and the workflow completes when all have.
func TestHTTPWorkflowGroup_L3_002(t *testing.T) {
	t.Parallel()
	c := client{t: t, base: startApp(t, app.Config{}).URL()}
	w := obj(c.must(201, "POST", "/ojs/v1/workflows", map[string]any{"type": "group",
		"jobs": []any{wfJob("wfg", "a"), wfJob("wfg", "b"), wfJob("wfg", "c")}})["workflow"])
	var jobs []map[string]any
	for range 3 {
		jobs = append(jobs, waitFetch(c, 10*time.Second, "wfg"))
	}
	for _, j := range jobs {
		ackJob(c, j, j["args"])
	}
	done := waitWorkflow(c, w["id"].(string), "completed")
	if done["jobs_completed"] != float64(3) || done["jobs_total"] != float64(3) {
		t.Fatalf("completed %v", done)
	}
}

// L3-BATCH-001/002 over HTTP, with DELETE (ojs-http-binding.md 14.3),
// 404 for an unknown workflow and 400s naming the field.
func TestHTTPWorkflowBatchCancelErrors_L3_003(t *testing.T) {
	t.Parallel()
	c := client{t: t, base: startApp(t, app.Config{}).URL()}
	cb := func(kind string) map[string]any { return wfJob("wfb-cb", kind) }
	w := obj(c.must(201, "POST", "/ojs/v1/workflows", map[string]any{"type": "batch",
		"jobs":      []any{wfJob("wfb", 1), wfJob("wfb", 2)},
		"callbacks": map[string]any{"on_success": cb("success"), "on_failure": cb("failure"), "on_complete": cb("complete")}})["workflow"])
	ackJob(c, waitFetch(c, 10*time.Second, "wfb"), map[string]any{"n": 1})
	ackJob(c, waitFetch(c, 10*time.Second, "wfb"), map[string]any{"n": 2})
	waitWorkflow(c, w["id"].(string), "completed")
	got := map[any]bool{}
	for range 2 {
		got[list(waitFetch(c, 10*time.Second, "wfb-cb")["args"])[0]] = true
	}
	if !got["success"] || !got["complete"] || fetchOne(c, "wfb-cb") != nil {
		t.Fatalf("callbacks %v, want success and complete once", got)
	}

	chain := obj(c.must(201, "POST", "/ojs/v1/workflows", map[string]any{"type": "chain",
		"steps": []any{wfJob("wfx"), wfJob("wfx")}})["workflow"])
	id := chain["id"].(string)
	del := obj(c.must(200, "DELETE", "/ojs/v1/workflows/"+id, nil)["workflow"])
	if del["state"] != "cancelled" || del["steps_cancelled"] != float64(2) || del["cancelled_at"] == nil {
		t.Fatalf("cancelled %v", del)
	}
	if fetchOne(c, "wfx") != nil {
		t.Fatal("a step of a cancelled workflow was fetched")
	}
	if r := c.do("DELETE", "/ojs/v1/workflows/"+id, nil); r.status != 409 {
		t.Fatalf("second DELETE: %d %s, want 409", r.status, r.raw)
	}
	for _, path := range []string{"/ojs/v1/workflows/0190a000-0000-7000-8000-000000000000", "/ojs/v1/workflows/nope"} {
		if r := c.do("GET", path, nil); r.status != 404 {
			t.Fatalf("GET %s: %d, want 404", path, r.status)
		}
	}
	for _, bc := range []struct {
		body  map[string]any
		field string
	}{
		{map[string]any{"type": "chain", "steps": []any{}}, "steps"},
		{map[string]any{"type": "tree", "steps": []any{wfJob("q")}}, "type"},
		{map[string]any{"type": "chain", "steps": []any{wfJob("q"), map[string]any{"type": "x", "args": "no"}}}, "steps[1].args"},
		{map[string]any{"type": "group", "jobs": []any{wfJob("q")}, "callbacks": map[string]any{"on_success": cb("s")}}, "callbacks.on_success"},
		{map[string]any{"type": "chain", "workflow_timeout": -1, "steps": []any{wfJob("q")}}, "workflow_timeout"},
	} {
		r := c.do("POST", "/ojs/v1/workflows", bc.body)
		e := wantErr(t, r, 400, "invalid_request")
		if f := obj(e["details"])["field"]; f != bc.field || !strings.Contains(fmt.Sprint(e["message"]), bc.field) {
			t.Fatalf("body %v: error %v, want it naming %s", bc.body, e, bc.field)
		}
	}
}

// Issue 18: a batch whose two jobs end at once on two jetgate processes
// (one NATS server): each callback fires exactly once.
func TestHTTPWorkflowBatchTwoProcesses(t *testing.T) {
	t.Parallel()
	ns := natstest.RunServer(t)
	cs := []client{
		{t: t, base: startApp(t, app.Config{NatsURL: ns.ClientURL()}).URL()},
		{t: t, base: startApp(t, app.Config{NatsURL: ns.ClientURL()}).URL()},
	}
	for round := range 3 {
		q := fmt.Sprintf("wf2p%d", round)
		w := obj(cs[0].must(201, "POST", "/ojs/v1/workflows", map[string]any{"type": "batch",
			"jobs":      []any{wfJob(q, 1), wfJob(q, 2)},
			"callbacks": map[string]any{"on_success": wfJob(q+"-cb", "success"), "on_complete": wfJob(q+"-cb", "complete")}})["workflow"])
		a, b := waitFetch(cs[0], 10*time.Second, q), waitFetch(cs[1], 10*time.Second, q)
		var wg sync.WaitGroup
		wg.Go(func() { ackJob(cs[0], a, map[string]any{}) })
		wg.Go(func() { ackJob(cs[1], b, map[string]any{}) })
		wg.Wait()
		waitWorkflow(cs[1], w["id"].(string), "completed")
		got := map[any]int{}
		for range 2 {
			got[list(waitFetch(cs[round%2], 10*time.Second, q+"-cb")["args"])[0]]++
		}
		if got["success"] != 1 || got["complete"] != 1 || fetchOne(cs[0], q+"-cb") != nil || fetchOne(cs[1], q+"-cb") != nil {
			t.Fatalf("round %d: callbacks %v, want success and complete once each", round, got)
		}
	}
}
