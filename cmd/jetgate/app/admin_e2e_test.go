package app_test

import (
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/jetgate/jetgate/cmd/jetgate/app"
	"github.com/jetgate/jetgate/jetstream/natstest"
)

// adminFixture is a jetgate with jobs in known states, for the operator API
// tests (ojs-admin-api.md).
type adminFixture struct {
	c client
	// ids per state and queue, in the order they were made.
	available, completed, discarded, scheduled, active []string
}

func enqueueAdmin(c client, queue, typ string, extra map[string]any) string {
	c.t.Helper()
	opts := map[string]any{"queue": queue, "retry": map[string]any{"max_attempts": 1}}
	body := map[string]any{"type": typ, "args": []any{1}, "options": opts}
	for k, v := range extra {
		body[k] = v
	}
	r := c.must(201, "POST", "/ojs/v1/jobs", body)
	return obj(r["job"])["id"].(string)
}

// setupAdmin makes, in queue "orders": 4 available jobs (types
// order.create x2, order.ship, mail.send), 2 completed, 2 discarded, 1
// scheduled and 1 active; and in queue "mail" 1 available job.
func setupAdmin(t *testing.T) adminFixture {
	t.Helper()
	return setupAdminOn(t, app.Config{})
}

func setupAdminOn(t *testing.T, cfg app.Config) adminFixture {
	t.Helper()
	s := startApp(t, cfg)
	c := client{t: t, base: s.URL()}
	f := adminFixture{c: c}
	// Jobs to finish first, so the available ones are what stays ready.
	for range 2 {
		id := enqueueAdmin(c, "orders", "order.done", nil)
		if j := fetchOne(c, "orders"); j == nil || j["id"] != id {
			t.Fatalf("fetch %s: %v", id, j)
		}
		c.must(200, "POST", "/ojs/v1/workers/ack", map[string]any{"job_id": id, "result": map[string]any{}})
		f.completed = append(f.completed, id)
	}
	for range 2 {
		id := enqueueAdmin(c, "orders", "order.fail", nil)
		if j := fetchOne(c, "orders"); j == nil || j["id"] != id {
			t.Fatalf("fetch %s: %v", id, j)
		}
		c.must(200, "POST", "/ojs/v1/workers/nack", map[string]any{"job_id": id,
			"error": map[string]any{"code": "ConnectionError", "message": "refused", "retryable": true}})
		f.discarded = append(f.discarded, id)
	}
	id := enqueueAdmin(c, "orders", "order.run", nil)
	if j := fetchOne(c, "orders"); j == nil || j["id"] != id {
		t.Fatalf("fetch %s: %v", id, j)
	}
	f.active = append(f.active, id)
	for _, typ := range []string{"order.create", "order.create", "order.ship", "mail.send"} {
		f.available = append(f.available, enqueueAdmin(c, "orders", typ, nil))
	}
	f.scheduled = append(f.scheduled, enqueueAdmin(c, "orders", "order.later",
		map[string]any{"scheduled_at": time.Now().Add(time.Hour).UTC().Format(time.RFC3339)}))
	enqueueAdmin(c, "mail", "mail.send", nil)
	return f
}

func itemIDs(body map[string]any) []string {
	var ids []string
	for _, it := range list(body["items"]) {
		ids = append(ids, obj(it)["id"].(string))
	}
	return ids
}

func wantIDs(t *testing.T, what string, got, want []string) {
	t.Helper()
	g, w := slices.Clone(got), slices.Clone(want)
	slices.Sort(g)
	slices.Sort(w)
	if !slices.Equal(g, w) {
		t.Fatalf("%s: got %v, want %v", what, got, want)
	}
}

// wantField checks a 400 answer names the field (ojs-http-binding error
// envelope, details.field).
func wantField(t *testing.T, r resp, field string) {
	t.Helper()
	if r.status != 400 {
		t.Fatalf("status %d, want 400: %s", r.status, r.raw)
	}
	if got := obj(obj(r.body["error"])["details"])["field"]; got != field {
		t.Fatalf("error names field %v, want %s: %s", got, field, r.raw)
	}
}

// ojs-admin-api.md 10.1 (ADM-005) and 6.1/6.2 (ADM-001): counts per state
// from the counters, every queue with counts, pause state and bounds.
func TestAdminStatsAndQueues_ADM001_ADM005(t *testing.T) {
	t.Parallel()
	f := setupAdmin(t)
	c := f.c
	st := c.must(200, "GET", "/ojs/v1/admin/stats", nil)
	jobs := obj(st["jobs"])
	want := map[string]float64{"available": 5, "completed": 2, "discarded": 2, "scheduled": 1, "active": 1,
		"retryable": 0, "cancelled": 0, "pending": 0}
	for k, v := range want {
		if jobs[k] != v {
			t.Fatalf("stats jobs.%s = %v, want %v: %v", k, jobs[k], v, st)
		}
	}
	if st["queues"] != float64(2) || st["uptime_seconds"] == nil {
		t.Fatalf("stats: %v", st)
	}
	// Every required endpoint is served, so the manifest declares the
	// extension (ojs-admin-api.md 2).
	man := c.must(200, "GET", "/ojs/manifest", nil)
	if !slices.Contains(list(man["extensions"]), any("urn:ojs:ext:admin-api")) {
		t.Fatalf("manifest extensions %v lack urn:ojs:ext:admin-api", man["extensions"])
	}

	qs := c.must(200, "GET", "/ojs/v1/admin/queues", nil)
	items := list(qs["items"])
	if len(items) != 2 || obj(qs["pagination"])["total"] != float64(2) {
		t.Fatalf("queues: %v", qs)
	}
	mail, orders := obj(items[0]), obj(items[1])
	if mail["name"] != "mail" || orders["name"] != "orders" || orders["state"] != "active" || orders["paused"] != false {
		t.Fatalf("queues: %v", qs)
	}
	if n := obj(orders["counts"]); n["available"] != float64(4) || n["completed"] != float64(2) || n["discarded"] != float64(2) {
		t.Fatalf("orders counts: %v", n)
	}
	// Pagination of queues (4: all list operations paginate).
	p2 := c.must(200, "GET", "/ojs/v1/admin/queues?page=2&per_page=1", nil)
	if l := list(p2["items"]); len(l) != 1 || obj(l[0])["name"] != "orders" || obj(p2["pagination"])["has_more"] != false {
		t.Fatalf("queues page 2: %v", p2)
	}
	p1 := c.must(200, "GET", "/ojs/v1/admin/queues?page=1&per_page=1", nil)
	if obj(p1["pagination"])["has_more"] != true {
		t.Fatalf("queues page 1: %v", p1)
	}
	wantField(t, c.do("GET", "/ojs/v1/admin/queues?page=0", nil), "page")

	// 6.2: one queue, with its bounds once set.
	c.must(200, "PUT", "/ojs/v1/admin/queues/orders/config", map[string]any{"backpressure": map[string]any{"max_depth": 100, "strategy": "reject"}})
	d := c.must(200, "GET", "/ojs/v1/admin/queues/orders", nil)
	if d["name"] != "orders" || obj(d["backpressure"])["max_depth"] != float64(100) {
		t.Fatalf("queue detail: %v", d)
	}
	if r := c.do("GET", "/ojs/v1/admin/queues/nosuch", nil); r.status != 404 {
		t.Fatalf("unknown queue: %d %s", r.status, r.raw)
	}
}

// ojs-admin-api.md 6.3/6.4 (ADM-002): pausing stops fetches and keeps
// enqueues; resuming brings them back; the same state as the data plane's
// pause.
func TestAdminPauseResume_ADM002(t *testing.T) {
	t.Parallel()
	s := startApp(t, app.Config{})
	c := client{t: t, base: s.URL()}
	id := enqueueAdmin(c, "email", "email.send", nil)
	p := c.must(200, "POST", "/ojs/v1/admin/queues/email/pause", nil)
	if p["name"] != "email" || p["paused"] != true || p["paused_at"] == nil {
		t.Fatalf("pause: %v", p)
	}
	if st := c.must(200, "GET", "/ojs/v1/queues/email/stats", nil); st["status"] != "paused" {
		t.Fatalf("data plane sees %v", st)
	}
	if j := fetchOne(c, "email"); j != nil {
		t.Fatalf("fetch from paused queue: %v", j)
	}
	if q := c.must(200, "GET", "/ojs/v1/admin/queues/email", nil); q["paused"] != true || obj(q["counts"])["available"] != float64(1) {
		t.Fatalf("paused queue: %v", q)
	}
	r := c.must(200, "POST", "/ojs/v1/admin/queues/email/resume", nil)
	if r["paused"] != false || r["state"] != "active" {
		t.Fatalf("resume: %v", r)
	}
	if j := waitFetch(c, 5*time.Second, "email"); j["id"] != id {
		t.Fatalf("fetch after resume: %v", j)
	}
	wantField(t, c.do("POST", "/ojs/v1/admin/queues/Bad!/pause", nil), "name")
}

// ojs-admin-api.md 7.1 (ADM-003): filter by state, queue, type and time,
// paginate by page number and by cursor; available jobs come from the
// ready stream, finished ones from their records.
func TestAdminListJobs_ADM003(t *testing.T) {
	t.Parallel()
	f := setupAdmin(t)
	c := f.c
	get := func(q string) map[string]any { return c.must(200, "GET", "/ojs/v1/admin/jobs?"+q, nil) }

	av := get("state=available&queue=orders")
	wantIDs(t, "available in orders", itemIDs(av), f.available)
	if obj(av["pagination"])["total"] != float64(4) {
		t.Fatalf("total: %v", av["pagination"])
	}
	// Ready order: the order they became ready.
	if ids := itemIDs(av); !slices.Equal(ids, f.available) {
		t.Fatalf("available order %v, want %v", ids, f.available)
	}
	wantIDs(t, "completed", itemIDs(get("state=completed")), f.completed)
	wantIDs(t, "discarded", itemIDs(get("state=discarded&queue=orders")), f.discarded)
	wantIDs(t, "scheduled", itemIDs(get("state=scheduled")), f.scheduled)
	wantIDs(t, "active", itemIDs(get("state=active")), f.active)
	all := get("queue=orders&per_page=100")
	wantIDs(t, "every state", itemIDs(all), slices.Concat(f.available, f.completed, f.discarded, f.scheduled, f.active))
	if obj(all["pagination"])["total"] != float64(10) {
		t.Fatalf("total of orders: %v", all["pagination"])
	}
	if it := obj(list(get("state=discarded&per_page=1")["items"])[0]); it["error"] == nil || it["discarded_at"] == nil {
		t.Fatalf("discarded item: %v", it)
	}

	// Type: exact and prefix.
	wantIDs(t, "type exact", itemIDs(get("state=available&type=order.create")), f.available[:2])
	wantIDs(t, "type prefix", itemIDs(get("type=order.c*")), f.available[:2])
	typed := get("type=mail.send")
	wantIDs(t, "type across queues", itemIDs(typed)[:1], f.available[3:])
	if len(itemIDs(typed)) != 2 || obj(typed["pagination"])["total"] != nil {
		t.Fatalf("type filter: %v (total unknown without a scan)", typed)
	}
	// Time range on created_at.
	future := url.QueryEscape(time.Now().Add(time.Hour).Format(time.RFC3339))
	if ids := itemIDs(get("since=" + future)); len(ids) != 0 {
		t.Fatalf("since the future: %v", ids)
	}
	if ids := itemIDs(get("until=" + future + "&queue=orders&per_page=100")); len(ids) != 10 {
		t.Fatalf("until the future: %v", ids)
	}

	// Pages by number.
	p1 := get("state=available&queue=orders&per_page=3")
	p2 := get("state=available&queue=orders&per_page=3&page=2")
	if got := append(itemIDs(p1), itemIDs(p2)...); !slices.Equal(got, f.available) {
		t.Fatalf("pages 1+2: %v, want %v", got, f.available)
	}
	pg := obj(p1["pagination"])
	if pg["page"] != float64(1) || pg["per_page"] != float64(3) || pg["has_more"] != true || pg["next_cursor"] == nil {
		t.Fatalf("page 1 pagination: %v", pg)
	}
	// Pages by cursor, through every state (records, then ready stream).
	seen := pageByCursor(t, get, "queue=orders&per_page=3")
	if len(seen) != 10 {
		t.Fatalf("cursor paging saw %d jobs: %v", len(seen), seen)
	}
	wantIDs(t, "cursor paging", seen, slices.Concat(f.available, f.completed, f.discarded, f.scheduled, f.active))

	// Bad input names the parameter.
	for _, b := range []struct{ q, field string }{
		{"state=sleeping", "state"}, {"queue=Bad!", "queue"}, {"since=yesterday", "since"},
		{"per_page=0", "per_page"}, {"page=-1", "page"}, {"sort=type", "sort"}, {"order=sideways", "order"},
		{"cursor=%21%21", "cursor"}, {"page=100000&per_page=100", "page"},
	} {
		wantField(t, c.do("GET", "/ojs/v1/admin/jobs?"+b.q, nil), b.field)
	}
	// A cursor of the ready stream does not continue a listing of records.
	c1 := get("state=available&per_page=1")
	wantField(t, c.do("GET", "/ojs/v1/admin/jobs?state=completed&cursor="+url.QueryEscape(obj(c1["pagination"])["next_cursor"].(string)), nil), "cursor")
}

// ADM-003 on a 3-node cluster with R3 streams and buckets, where direct
// gets are off and listings read one message get at a time from the
// stream leader.
func TestAdminListJobsClusterR3_ADM003(t *testing.T) {
	t.Parallel()
	cl := natstest.RunCluster(t, 3)
	f := setupAdminOn(t, app.Config{NatsURL: cl.URLs(), Replicas: 3})
	c := f.c
	get := func(q string) map[string]any { return c.must(200, "GET", "/ojs/v1/admin/jobs?"+q, nil) }
	wantIDs(t, "available", itemIDs(get("state=available&queue=orders")), f.available)
	wantIDs(t, "discarded", itemIDs(get("state=discarded")), f.discarded)
	seen := pageByCursor(t, get, "queue=orders&per_page=4")
	wantIDs(t, "cursor paging", seen, slices.Concat(f.available, f.completed, f.discarded, f.scheduled, f.active))
	res := c.must(200, "POST", "/ojs/v1/admin/jobs/bulk/retry", map[string]any{"filter": map[string]any{"state": "discarded"}, "confirm": true})
	if res["succeeded"] != float64(2) {
		t.Fatalf("bulk retry: %v", res)
	}
}

// ojs-admin-api.md 7.2 (ADM-004): the whole envelope with its errors and
// metadata; an unknown id is 404.
func TestAdminJobDetail_ADM004(t *testing.T) {
	t.Parallel()
	f := setupAdmin(t)
	c := f.c
	j := c.must(200, "GET", "/ojs/v1/admin/jobs/"+f.discarded[0], nil)
	if j["id"] != f.discarded[0] || j["state"] != "discarded" || j["args"] == nil || len(list(j["errors"])) != 1 {
		t.Fatalf("detail: %v", j)
	}
	if md := obj(j["metadata"]); md["created_at"] == nil || md["discarded_at"] == nil {
		t.Fatalf("metadata: %v", j["metadata"])
	}
	if j["x_jetgate"] != nil {
		t.Fatalf("bookkeeping leaked: %v", j)
	}
	if r := c.do("GET", "/ojs/v1/admin/jobs/019503e1-7b2a-7000-8000-000000000001", nil); r.status != 404 {
		t.Fatalf("unknown job: %d %s", r.status, r.raw)
	}
	// 7.4: retry under the admin prefix, the dead letter retry: attempts reset.
	r := c.must(200, "POST", "/ojs/v1/admin/jobs/"+f.discarded[0]+"/retry", nil)
	if obj(r["job"])["state"] != "available" || obj(r["job"])["attempt"] != float64(0) {
		t.Fatalf("admin retry: %v", r)
	}
	if r := c.do("POST", "/ojs/v1/admin/jobs/"+f.completed[0]+"/retry", nil); r.status != 404 {
		t.Fatalf("admin retry of a completed job: %d %s", r.status, r.raw)
	}
}

// ojs-admin-api.md 4 and 8 (ADM-007, ADM-R005): bulk operations refuse to
// run without "confirm": true; with it, each matching job is changed by
// its own transition, and the answer counts successes and names failures.
func TestAdminBulk_ADM007(t *testing.T) {
	t.Parallel()
	f := setupAdmin(t)
	c := f.c
	for _, action := range []string{"retry", "cancel", "delete"} {
		path := "/ojs/v1/admin/jobs/bulk/" + action
		wantField(t, c.do("POST", path, map[string]any{"filter": map[string]any{"queue": "orders"}}), "confirm")
		wantField(t, c.do("POST", path, map[string]any{"filter": map[string]any{"queue": "orders"}, "confirm": false}), "confirm")
		wantField(t, c.do("POST", path, map[string]any{"filter": map[string]any{"state": "nope"}, "confirm": true}), "filter.state")
	}
	// Nothing changed by the refused requests.
	wantIDs(t, "discarded after refusals", itemIDs(c.must(200, "GET", "/ojs/v1/admin/jobs?state=discarded", nil)), f.discarded)
	if r := c.do("POST", "/ojs/v1/admin/jobs/bulk/explode", map[string]any{"confirm": true}); r.status != 404 {
		t.Fatalf("unknown action: %d %s", r.status, r.raw)
	}

	// 8.1: retry the discarded jobs of a queue and type.
	res := c.must(200, "POST", "/ojs/v1/admin/jobs/bulk/retry", map[string]any{
		"filter": map[string]any{"queue": "orders", "state": "discarded", "type": "order.fail"}, "confirm": true})
	if res["action"] != "retry" || res["matched"] != float64(2) || res["succeeded"] != float64(2) || res["failed"] != float64(0) {
		t.Fatalf("bulk retry: %v", res)
	}
	for _, id := range f.discarded {
		if j := c.must(200, "GET", "/ojs/v1/jobs/"+id, nil); obj(j["job"])["state"] != "available" {
			t.Fatalf("retried job %s: %v", id, j)
		}
	}
	// A filter matching jobs the action does not apply to: each is a failure
	// with its reason, the others succeed.
	res = c.must(200, "POST", "/ojs/v1/admin/jobs/bulk/retry", map[string]any{
		"filter": map[string]any{"queue": "orders", "type": "order.done"}, "confirm": true})
	if res["matched"] != float64(2) || res["succeeded"] != float64(0) || res["failed"] != float64(2) {
		t.Fatalf("retry of completed jobs: %v", res)
	}
	if e := obj(list(res["errors"])[0]); e["code"] != "invalid_state" || e["job_id"] == nil || e["error"] == "" {
		t.Fatalf("failure: %v", e)
	}

	// 8.2: cancel every order.create job (available); the limit bounds one request.
	res = c.must(200, "POST", "/ojs/v1/admin/jobs/bulk/cancel", map[string]any{
		"filter": map[string]any{"type": "order.create"}, "confirm": true, "limit": 1})
	if res["matched"] != float64(1) || res["succeeded"] != float64(1) || res["has_more"] != true || res["next_cursor"] == nil {
		t.Fatalf("bulk cancel, limit 1: %v", res)
	}
	res = c.must(200, "POST", "/ojs/v1/admin/jobs/bulk/cancel", map[string]any{
		"filter": map[string]any{"type": "order.create"}, "confirm": true, "cursor": res["next_cursor"]})
	if res["matched"] != float64(1) || res["succeeded"] != float64(1) {
		t.Fatalf("bulk cancel, second request: %v", res)
	}
	wantIDs(t, "cancelled", itemIDs(c.must(200, "GET", "/ojs/v1/admin/jobs?state=cancelled", nil)), f.available[:2])
	if n := c.must(200, "GET", "/ojs/v1/admin/stats", nil); obj(n["jobs"])["cancelled"] != float64(2) {
		t.Fatalf("stats after cancel: %v", n)
	}

	// 8.3: delete finished jobs; unfinished ones matched are refused.
	res = c.must(200, "POST", "/ojs/v1/admin/jobs/bulk/delete", map[string]any{
		"filter": map[string]any{"queue": "orders", "state": "completed"}, "confirm": true})
	if res["matched"] != float64(2) || res["succeeded"] != float64(2) {
		t.Fatalf("bulk delete: %v", res)
	}
	for _, id := range f.completed {
		if r := c.do("GET", "/ojs/v1/jobs/"+id, nil); r.status != 404 {
			t.Fatalf("deleted job %s: %d", id, r.status)
		}
	}
	res = c.must(200, "POST", "/ojs/v1/admin/jobs/bulk/delete", map[string]any{
		"filter": map[string]any{"queue": "orders", "state": "active"}, "confirm": true})
	if res["matched"] != float64(1) || res["failed"] != float64(1) {
		t.Fatalf("bulk delete of an active job: %v", res)
	}
	if j := c.must(200, "GET", "/ojs/v1/jobs/"+f.active[0], nil); obj(j["job"])["state"] != "active" {
		t.Fatalf("active job after refused delete: %v", j)
	}
	if n := c.must(200, "GET", "/ojs/v1/admin/stats", nil); obj(n["jobs"])["completed"] != float64(0) {
		t.Fatalf("stats after delete: %v", n)
	}
}

// ojs-admin-api.md 11 and ojs-dead-letter.md 10: the dead letter views
// under /ojs/v1/admin/dead-letter share the data plane's operations.
func TestAdminDeadLetter_DLQ(t *testing.T) {
	t.Parallel()
	f := setupAdmin(t)
	c := f.c
	l := c.must(200, "GET", "/ojs/v1/admin/dead-letter?queue=orders", nil)
	wantIDs(t, "dead letter", itemIDs(l), f.discarded)
	wantField(t, c.do("GET", "/ojs/v1/admin/dead-letter?state=completed", nil), "state")
	for _, path := range []string{"/ojs/v1/admin/dead-letter/stats", "/ojs/v1/dead-letter/stats"} {
		st := c.must(200, "GET", path, nil)
		if st["total"] != float64(2) || obj(st["by_queue"])["orders"] != float64(2) || obj(st["retention"])["max_age"] == nil {
			t.Fatalf("%s: %v", path, st)
		}
	}
	r := c.must(200, "POST", "/ojs/v1/admin/dead-letter/"+f.discarded[0]+"/retry", nil)
	if obj(r["job"])["state"] != "available" || obj(r["job"])["attempt"] != float64(0) {
		t.Fatalf("retry: %v", r)
	}
	c.must(204, "DELETE", "/ojs/v1/admin/dead-letter/"+f.discarded[1], nil) // issue 32: 204, no body
	if r := c.do("GET", "/ojs/v1/jobs/"+f.discarded[1], nil); r.status != 404 {
		t.Fatalf("deleted dead letter job: %d", r.status)
	}
	if st := c.must(200, "GET", "/ojs/v1/admin/dead-letter/stats", nil); st["total"] != float64(0) {
		t.Fatalf("stats after retry and delete: %v", st)
	}
	if r := c.do("POST", "/ojs/v1/admin/dead-letter/"+f.completed[0]+"/retry", nil); r.status != 404 {
		t.Fatalf("retry of a completed job: %d %s", r.status, r.raw)
	}
	// 7.3: cancel under the admin prefix.
	r = c.must(200, "POST", "/ojs/v1/admin/jobs/"+f.scheduled[0]+"/cancel", nil)
	if obj(r["job"])["state"] != "cancelled" {
		t.Fatalf("admin cancel: %v", r)
	}
}

// pageByCursor lists query page by page, following next_cursor until
// has_more is false, and returns the ids seen in order.
func pageByCursor(t *testing.T, get func(string) map[string]any, query string) []string {
	t.Helper()
	var seen []string
	q := query
	for n := 0; ; n++ {
		if n > 10 {
			t.Fatal("cursor paging does not end")
		}
		b := get(q)
		seen = append(seen, itemIDs(b)...)
		pg := obj(b["pagination"])
		if pg["has_more"] != true {
			return seen
		}
		q = query + "&cursor=" + url.QueryEscape(pg["next_cursor"].(string))
	}
}
