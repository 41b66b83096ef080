package dashboard_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jetgate/jetgate/cmd/jetgate/app"
)

// Issue 19, "Dashboard": the snapshot shows queues with depth, pressure
// (bounded queue: depth/bound and strategy) and pause state, rate-limit
// keys with active / limit, window counts and waiting jobs, priority
// levels per queue, and recent events. GET /dashboard/snapshot is the
// document the stream sends.
func TestSnapshotShowsQueuesLimitsLevelsAndEvents(t *testing.T) {
	t.Parallel()
	s := start(t, app.Config{})
	// The first read starts the event capture (package events): events
	// from now on are listed.
	first := s.snapshot()
	for _, k := range []string{"generated_at", "took_us", "server", "totals", "queues", "queues_omitted",
		"rate_limits", "rate_limits_omitted", "events"} {
		if _, ok := first[k]; !ok {
			t.Fatalf("snapshot lacks %q: %v", k, first)
		}
	}
	if len(list(first["queues"])) != 0 || first["queues"] == nil || first["events"] == nil {
		t.Fatalf("empty server: queues and events must be [] : %v", first)
	}

	// A bounded queue (max_depth 10, reject) with jobs at levels 1, 1, 5.
	s.must(200, "PUT", "/ojs/v1/admin/queues/bounded/config",
		map[string]any{"backpressure": map[string]any{"max_depth": 10, "strategy": "reject"}})
	var ids []string
	for _, p := range []int{1, 1, 5} {
		ids = append(ids, s.enqueue("bounded", map[string]any{"priority": p}))
	}
	// A queue whose only job runs: no level has an available job.
	s.enqueue("drained", map[string]any{"priority": 4})
	if s.fetch("drained") == nil {
		t.Fatal("no job fetched from drained")
	}
	// A paused queue with one job.
	s.enqueue("held", nil)
	s.must(200, "POST", "/ojs/v1/queues/held/pause", nil)
	// Rate limit tenant:acme, concurrency 1 and 5 per day: one job runs,
	// the second waits. A day, not a minute: windows start on multiples
	// of their period, and a test that straddled a minute read the window
	// after the one its start counted in (current_count 0).
	rl := map[string]any{"key": "tenant:acme", "concurrency": 1, "rate": map[string]any{"limit": 5, "period": "PT24H"}}
	s.enqueue("limited", map[string]any{"rate_limit": rl})
	s.enqueue("limited", map[string]any{"rate_limit": rl})
	if j := s.fetch("limited"); j == nil {
		t.Fatal("no job fetched from limited")
	}
	if j := s.fetch("limited"); j != nil {
		t.Fatalf("RL-001: second job started: %v", j["id"])
	}

	var snap map[string]any
	eventually(t, 10*time.Second, func() string {
		snap = s.snapshot()
		b := queueRow(snap, "bounded")
		if b == nil || b["depth"] != 3.0 {
			return fmt.Sprintf("bounded row %v", b)
		}
		k := limitRow(snap, "tenant:acme")
		if k == nil || k["waiting_count"] != 1.0 {
			return fmt.Sprintf("tenant:acme row %v", k)
		}
		if !hasEvent(snap, "job.enqueued", ids[0]) {
			return "no job.enqueued event of " + ids[0]
		}
		// The count keeper writes active jobs, the ready messages their
		// claims hold and the parked jobs once a second.
		if d := queueRow(snap, "drained"); d == nil || obj(d["counts"])["active"] != 1.0 || d["depth"] != 0.0 {
			return fmt.Sprintf("drained row %v", d)
		}
		if l := queueRow(snap, "limited"); l == nil || obj(l["counts"])["available"] != 1.0 {
			return fmt.Sprintf("limited row %v", l)
		}
		return ""
	})

	// Queue rows, by name, with depth and pressure.
	var names []string
	for _, q := range list(snap["queues"]) {
		names = append(names, obj(q)["name"].(string))
	}
	if !slices.Equal(names, []string{"bounded", "drained", "held", "limited"}) {
		t.Fatalf("queues %v, want bounded, drained, held, limited by name", names)
	}
	b := queueRow(snap, "bounded")
	bound := obj(b["bound"])
	if bound["max_depth"] != 10.0 || bound["strategy"] != "reject" || bound["source"] != "queue" || b["pressure"] != 0.3 {
		t.Fatalf("bounded queue: pressure %v bound %v, want 3/10 reject from queue", b["pressure"], bound)
	}
	if obj(b["counts"])["available"] != 3.0 || b["paused"] != false {
		t.Fatalf("bounded queue counts %v paused %v", b["counts"], b["paused"])
	}
	// Priority levels: available jobs per level, lowest first.
	if got, _ := json.Marshal(b["priorities"]); string(got) != `[{"count":2,"priority":1},{"count":1,"priority":5}]` {
		t.Fatalf("priority levels %s, want p1: 2, p5: 1", got)
	}
	if d := queueRow(snap, "drained"); len(list(d["priorities"])) != 0 || d["depth"] != 0.0 || obj(d["counts"])["active"] != 1.0 {
		t.Fatalf("drained queue: %v, want depth 0, no level, 1 active", d)
	}
	h := queueRow(snap, "held")
	if h["paused"] != true || h["depth"] != 1.0 || h["bound"] != nil || h["pressure"] != nil {
		t.Fatalf("paused unbounded queue: %v", h)
	}
	l := queueRow(snap, "limited")
	if c := obj(l["counts"]); c["active"] != 1.0 || c["available"] != 1.0 || l["depth"] != 1.0 {
		t.Fatalf("limited queue: %v (depth counts available, not active)", l)
	}

	// Rate-limit key: active / limit, window count, waiting.
	k := limitRow(snap, "tenant:acme")
	conc, rate := obj(k["concurrency"]), obj(k["rate"])
	if conc["active"] != 1.0 || conc["limit"] != 1.0 || rate["current_count"] != 1.0 || rate["limit"] != 5.0 {
		t.Fatalf("tenant:acme: concurrency %v rate %v, want 1/1 and 1 of 5", conc, rate)
	}

	// Totals add up the queues and the waiting jobs.
	tot := obj(snap["totals"])
	if tot["queues"] != 4.0 || tot["paused_queues"] != 1.0 || obj(tot["jobs"])["available"] != 5.0 ||
		obj(tot["jobs"])["active"] != 2.0 || tot["waiting"] != 1.0 {
		t.Fatalf("totals %v", tot)
	}
	if sv := obj(snap["server"]); sv["status"] != "ok" || sv["version"] != app.Version {
		t.Fatalf("server %v", sv)
	}
	if snap["errors"] != nil {
		t.Fatalf("errors %v", snap["errors"])
	}
}

func limitRow(snap map[string]any, key string) map[string]any {
	for _, k := range list(snap["rate_limits"]) {
		if obj(k)["key"] == key {
			return obj(k)
		}
	}
	return nil
}

func hasEvent(snap map[string]any, typ, subject string) bool {
	for _, e := range list(snap["events"]) {
		if obj(e)["type"] == typ && obj(e)["subject"] == subject {
			return true
		}
	}
	return false
}

// Issue 19, "Dashboard ... updating live (SSE)": GET /dashboard/stream
// sends a snapshot at once and about every second, pushes new events as
// "events", and ends when the server shuts down (the feeder stops with it:
// goleak in TestMain).
func TestStreamSendsSnapshotsAndEventsAndEndsOnShutdown(t *testing.T) {
	t.Parallel()
	s := start(t, app.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, evs := s.openStream(ctx, nil)
	if res.StatusCode != 200 || res.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("stream: %d %s", res.StatusCode, res.Header.Get("Content-Type"))
	}
	next := func(name string, ok func(string) bool) sseEvent {
		t.Helper()
		for {
			select {
			case ev, open := <-evs:
				if !open {
					t.Fatalf("stream ended waiting for %q", name)
				}
				if ev.name == name && ok(ev.data) {
					return ev
				}
			case <-ctx.Done():
				t.Fatalf("no %q event", name)
			}
		}
	}
	var first map[string]any
	ev := next("snapshot", func(string) bool { return true })
	if err := json.Unmarshal([]byte(ev.data), &first); err != nil || first["queues"] == nil {
		t.Fatalf("first snapshot: %v %s", err, ev.data)
	}

	// A job enqueued now: an "events" frame names it, and a later
	// snapshot shows its queue with depth 1.
	id := s.enqueue("live", nil)
	next("events", func(d string) bool {
		var list []map[string]any
		if json.Unmarshal([]byte(d), &list) != nil {
			t.Fatalf("events frame is not a JSON array: %s", d)
		}
		return slices.ContainsFunc(list, func(e map[string]any) bool {
			return e["type"] == "job.enqueued" && e["subject"] == id
		})
	})
	start := time.Now()
	next("snapshot", func(d string) bool {
		var m map[string]any
		_ = json.Unmarshal([]byte(d), &m)
		q := queueRow(m, "live")
		return q != nil && q["depth"] == 1.0
	})
	t.Logf("snapshot with the new queue %s after its event", time.Since(start).Round(time.Millisecond))

	// Snapshots keep coming about a second apart: three in a row span two
	// intervals (a tick delayed by a slow read may shorten one gap, never
	// both).
	var times []time.Time
	for range 3 {
		var m struct {
			At time.Time `json:"generated_at"`
		}
		_ = json.Unmarshal([]byte(next("snapshot", func(string) bool { return true }).data), &m)
		times = append(times, m.At)
	}
	if span := times[2].Sub(times[0]); span < 900*time.Millisecond || span > 10*time.Second {
		t.Fatalf("three snapshots span %s, want about 2 s", span)
	}

	// Shutdown ends the stream (CloseStreams' counterpart): the channel
	// closes well before the shutdown timeout.
	shut := make(chan error, 1)
	go func() {
		sctx, scancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer scancel()
		shut <- s.app.Shutdown(sctx)
	}()
	deadline := time.After(10 * time.Second)
	for open := true; open; {
		select {
		case _, open = <-evs:
		case <-deadline:
			t.Fatal("stream still open 10 s after shutdown began")
		}
	}
	if err := <-shut; err != nil {
		t.Fatalf("shutdown: %v", err)
	}
}

// Access control (docs/dashboard.md): with tokens configured the page,
// snapshot and stream need an admin token, by bearer header, ?token= (which
// sets an HttpOnly SameSite=Strict cookie and redirects to "/") or that
// cookie; another role answers 403, no or a wrong token 401. The assets
// are open. The token never reaches the logs.
func TestAdminTokenGuardsDashboard(t *testing.T) {
	t.Parallel()
	const admin, producer = "adm-secret-7f3c9d", "prod-secret-2b8e1a"
	s := start(t, app.Config{AdminTokens: []string{admin}, ProducerTokens: []string{producer}})
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	get := func(path string, hdr map[string]string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest("GET", s.base+path, nil)
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		res, err := noRedirect.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res
	}

	// No token: the page answers a sign-in form, the API paths the envelope.
	if r := get("/", nil); r.StatusCode != 401 || !strings.HasPrefix(r.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("page without token: %d %s", r.StatusCode, r.Header.Get("Content-Type"))
	}
	for _, p := range []string{"/dashboard/snapshot", "/dashboard/stream"} {
		status, h, raw := s.call("GET", p, nil)
		if status != 401 || !strings.Contains(string(raw), `"code":"unauthorized"`) || h.Get("WWW-Authenticate") == "" {
			t.Fatalf("%s without token: %d %s", p, status, raw)
		}
	}
	// A producer token is known but not admin: 403.
	s.token = producer
	if status, _, raw := s.call("GET", "/dashboard/snapshot", nil); status != 403 || !strings.Contains(string(raw), `"code":"forbidden"`) {
		t.Fatalf("producer token: %d %s", status, raw)
	}
	if r := get("/?token="+producer, nil); r.StatusCode != 403 || len(r.Cookies()) != 0 {
		t.Fatalf("producer token in query: %d, cookies %v", r.StatusCode, r.Cookies())
	}
	// The admin token as a bearer header.
	s.token = admin
	s.snapshot()
	s.token = ""

	// ?token= sets the cookie and redirects to "/" without the token.
	r := get("/?token="+admin, nil)
	if r.StatusCode != http.StatusSeeOther || r.Header.Get("Location") != "/" {
		t.Fatalf("page with ?token=: %d Location %q", r.StatusCode, r.Header.Get("Location"))
	}
	var cookie *http.Cookie
	for _, c := range r.Cookies() {
		if c.Name == "jetgate_dashboard" {
			cookie = c
		}
	}
	if cookie == nil || !cookie.HttpOnly || cookie.SameSite != http.SameSiteStrictMode || cookie.Path != "/" ||
		strings.Contains(cookie.Value, admin) {
		t.Fatalf("cookie %+v: want HttpOnly, SameSite=Strict, Path=/, token encoded", cookie)
	}
	withCookie := map[string]string{"Cookie": cookie.String()}
	if r := get("/", withCookie); r.StatusCode != 200 || !strings.HasPrefix(r.Header.Get("Content-Type"), "text/html") ||
		r.Header.Get("Referrer-Policy") != "no-referrer" {
		t.Fatalf("page with cookie: %d %v", r.StatusCode, r.Header)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, evs := s.openStream(ctx, http.Header{"Cookie": {cookie.String()}})
	if res.StatusCode != 200 {
		t.Fatalf("stream with cookie: %d", res.StatusCode)
	}
	if ev := <-evs; ev.name != "snapshot" {
		t.Fatalf("stream with cookie: first event %q", ev.name)
	}
	cancel()

	// A wrong token in the query: 401 and the cookie is cleared.
	r = get("/?token=wrong-token", withCookie)
	if r.StatusCode != 401 || len(r.Cookies()) != 1 || r.Cookies()[0].MaxAge >= 0 {
		t.Fatalf("wrong token: %d, cookies %v", r.StatusCode, r.Cookies())
	}
	// The assets are open (the sign-in form uses the style).
	for _, p := range []string{"/dashboard/assets/dashboard.js", "/dashboard/assets/dashboard.css"} {
		if r := get(p, nil); r.StatusCode != 200 {
			t.Fatalf("%s: %d", p, r.StatusCode)
		}
	}
	// The OJS API does not take the cookie: it opens the dashboard only.
	if r := get("/ojs/v1/queues", withCookie); r.StatusCode != 401 {
		t.Fatalf("API with dashboard cookie: %d, want 401", r.StatusCode)
	}
	// Unknown dashboard path and a POST.
	s.token = admin
	for _, p := range []string{"/dashboard/nope", "/dashboard/assets/"} {
		if status, _, raw := s.call("GET", p, nil); status != 404 || !strings.Contains(string(raw), `"code":"not_found"`) {
			t.Fatalf("GET %s: %d %s, want 404 not_found", p, status, raw)
		}
	}
	if status, h, _ := s.call("POST", "/dashboard/snapshot", nil); status != 405 || h.Get("Allow") != "GET, HEAD" {
		t.Fatalf("POST snapshot: %d Allow %q", status, h.Get("Allow"))
	}
	for _, tok := range []string{admin, producer} {
		if strings.Contains(s.logs.String(), tok) {
			t.Fatalf("a token is in the logs")
		}
	}
}

// serve --dashboard=false (Config.DisableDashboard): "/" is the binding's
// again (404 envelope), and the API is unchanged.
func TestDashboardOff(t *testing.T) {
	t.Parallel()
	s := start(t, app.Config{DisableDashboard: true})
	for _, p := range []string{"/", "/dashboard/snapshot"} {
		if status, h, _ := s.call("GET", p, nil); status != 404 || h.Get("Content-Type") != "application/openjobspec+json" {
			t.Fatalf("GET %s with the dashboard off: %d %s", p, status, h.Get("Content-Type"))
		}
	}
	s.must(200, "GET", "/ojs/v1/queues", nil)
}
