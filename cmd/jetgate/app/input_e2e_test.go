package app_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"math/rand/v2"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"

	"github.com/jetgate/jetgate/admission/ojs"
	"github.com/jetgate/jetgate/cmd/jetgate/app"
	"github.com/jetgate/jetgate/jetstream/topology"
)

// badBodies are request objects that encoding/json reads without a word
// but not as sent, and the field each must be refused under (issue 31
// item 5): a key given twice (the last would win silently), at the top
// and deep inside, and text that is not UTF-8 (it would become U+FFFD),
// as bytes and as half a surrogate pair.
var badBodies = []struct{ body, field string }{
	{`{"zz":1,"zz":2}`, "zz"},
	{`{"a":{"b":[{"c":1},{"c":1,"c":2}]}}`, "a.b[1].c"},
	{"{\"zz\":\"caf\xe9\"}", "zz"},
	{`{"args":["ok","\ud800"]}`, "args[1]"},
}

// Issue 31 item 5: every route of the HTTP API that takes a body (every
// POST, PUT, PATCH and DELETE of docs/reference.md) and every endpoint of
// the NATS API answers 400 invalid_payload naming the field for a key
// given twice and for text that is not UTF-8, and changes nothing.
func TestIssue31BodiesHoldTextAndKeysOnce(t *testing.T) {
	t.Parallel()
	s := startApp(t, app.Config{})
	c := client{t: t, base: s.URL()}
	id := ojs.NewID()
	pathVar := regexp.MustCompile(`\{[^}]*\}`)
	routes := 0
	for _, rt := range referencedRoutes(t) {
		method, tmpl, _ := strings.Cut(rt, " ")
		if method == http.MethodGet || strings.HasSuffix(tmpl, "/stream") {
			continue
		}
		routes++
		path := pathVar.ReplaceAllLiteralString(tmpl, id)
		for _, bb := range badBodies {
			r := rawDo(t, method, s.URL()+path, []byte(bb.body))
			e := obj(r.body["error"])
			if r.status != 400 || e["code"] != ojs.CodeInvalidPayload || obj(e["details"])["field"] != bb.field {
				t.Errorf("%s %s %q: %d %s, want 400 invalid_payload naming %s", method, path, bb.body, r.status, r.raw, bb.field)
			}
		}
	}
	if routes < 25 {
		t.Fatalf("only %d routes with a body read from docs/reference.md", routes)
	}

	nc, _ := connectApp(t, s)
	for _, subj := range s.NatsAPI().Subjects() {
		for _, bb := range badBodies {
			res, err := nc.Request(subj, []byte(bb.body), 10*time.Second)
			if err != nil {
				t.Fatalf("%s: %v", subj, err)
			}
			var env struct {
				Error struct {
					Code    string         `json:"code"`
					Details map[string]any `json:"details"`
				} `json:"error"`
			}
			_ = json.Unmarshal(res.Data, &env)
			if res.Header.Get(micro.ErrorCodeHeader) != "400" || env.Error.Code != ojs.CodeInvalidPayload || env.Error.Details["field"] != bb.field {
				t.Errorf("%s %q: %s %s, want 400 invalid_payload naming %s", subj, bb.body,
					res.Header.Get(micro.ErrorCodeHeader), res.Data, bb.field)
			}
		}
	}
	// Nothing was enqueued by any of them.
	if page := c.must(200, "GET", "/ojs/v1/admin/jobs", nil); len(list(page["items"])) != 0 {
		t.Fatalf("jobs exist after refused requests: %v", page)
	}
}

// rawDo sends body as it is (the client helper marshals, which would
// repair the text) and decodes the answer.
func rawDo(t *testing.T, method, url string, body []byte) resp {
	t.Helper()
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/openjobspec+json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	r := resp{status: res.StatusCode, header: res.Header, raw: string(raw)}
	_ = json.Unmarshal(raw, &r.body)
	return r
}

// Issue 31 item 4, end to end over random instants up to year 9999: a
// scheduled_at, delay_until or expires_at past 2262-04-11T23:47:16.854Z
// is 400 naming the field and that time; an earlier one is accepted, its
// timer is written for that very instant in a form JetStream keeps
// exactly (int64 nanoseconds), and it never fires early: once a job
// scheduled a second ahead has come due, every far job is still scheduled
// (or, with only expires_at, still available).
func TestIssue31FarInstantsNeverFireEarly(t *testing.T) {
	t.Parallel()
	s := startApp(t, app.Config{})
	c := client{t: t, base: s.URL()}
	_, js := connectApp(t, s)
	timers, err := js.Stream(context.Background(), topology.TimerStream)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(31, 9999))
	lo := time.Now().AddDate(1, 0, 0).UnixMilli()
	hi := time.Date(9999, 12, 31, 23, 59, 59, 999_000_000, time.UTC).UnixMilli()
	type far struct {
		id, state string
	}
	var kept []far
	refused := 0
	for i := range 90 {
		var at time.Time
		switch i % 5 {
		case 0, 1: // around the latest time, where the bound bites
			at = ojs.LatestTime.Add(time.Duration(r.Int64N(int64(72*time.Hour))) - 36*time.Hour).Truncate(time.Millisecond)
		case 2, 3: // from a year ahead to the latest time
			at = time.UnixMilli(lo + r.Int64N(ojs.LatestTime.UnixMilli()-lo)).UTC()
		default: // anywhere up to year 9999
			at = time.UnixMilli(lo + r.Int64N(hi-lo)).UTC()
		}
		field, opts := []string{"scheduled_at", "delay_until", "expires_at"}[i%3], map[string]any{"queue": "far"}
		if field == "expires_at" {
			opts["queue"] = "far-expiring" // available at once: kept out of the fetches below
		}
		body := map[string]any{"type": "far.job", "args": []any{i}, "options": opts}
		text := at.In(time.FixedZone("", 3600*(i%5-2))).Format(time.RFC3339Nano)
		want := field
		if field == "delay_until" {
			opts[field], want = text, "options.delay_until"
		} else {
			body[field] = text
		}
		res := c.do("POST", "/ojs/v1/jobs", body)
		if at.After(ojs.LatestTime) {
			refused++
			e := obj(res.body["error"])
			if res.status != 400 || e["code"] != ojs.CodeInvalidPayload || obj(e["details"])["field"] != want ||
				!strings.Contains(res.raw, ojs.LatestTimeText) {
				t.Fatalf("%s %s: %d %s, want 400 naming %s and %s", field, text, res.status, res.raw, want, ojs.LatestTimeText)
			}
			continue
		}
		job := obj(res.body["job"])
		state, kind := "scheduled", topology.TimerDue
		if field == "expires_at" {
			state, kind = "available", topology.TimerExpire
		}
		if res.status != 201 || job["state"] != state {
			t.Fatalf("%s %s: %d %s, want 201 %s", field, text, res.status, res.raw, state)
		}
		id := job["id"].(string)
		m, err := timers.GetLastMsgForSubject(context.Background(), topology.TimerSchedule(kind, id))
		if err != nil {
			t.Fatalf("%s %s: no %s timer: %v", field, text, kind, err)
		}
		sched, _ := strings.CutPrefix(m.Header.Get(jetstream.ScheduleHeader), "@at ")
		fires, err := time.Parse(time.RFC3339, sched)
		if err != nil || !fires.Equal(at) || !time.Unix(0, fires.UnixNano()).Equal(fires) {
			t.Fatalf("%s %s: timer %q (%v), want %s kept exactly in int64 nanoseconds", field, text, sched, err, at.Format(time.RFC3339Nano))
		}
		kept = append(kept, far{id, state})
	}
	if refused < 10 || len(kept) < 30 {
		t.Fatalf("%d refused, %d kept: the instants do not cover both sides", refused, len(kept))
	}
	// A job due in a second: when it can be fetched, the timers written
	// before it have been looked at; none of the far ones may have fired.
	c.must(201, "POST", "/ojs/v1/jobs", map[string]any{"type": "near.job", "args": []any{},
		"options": map[string]any{"queue": "far", "delay_until": "+PT1S"}})
	if j := waitFetch(c, 30*time.Second, "far"); j["type"] != "near.job" {
		t.Fatalf("fetched %v before the job due in a second", j)
	}
	for _, k := range kept {
		if got := obj(c.must(200, "GET", "/ojs/v1/jobs/"+k.id, nil)["job"])["state"]; got != k.state {
			t.Errorf("job %s is %v, want still %s", k.id, got, k.state)
		}
	}
}

// Issue 31 item 4: durations a client gives (a total timeout, an
// execution and heartbeat timeout, a unique period) of a few hundred
// years put their deadline past the latest time JetStream can schedule;
// it is kept at that time instead of wrapping around and firing at once.
func TestIssue31FarDeadlinesNeverFireEarly(t *testing.T) {
	t.Parallel()
	s := startApp(t, app.Config{})
	c := client{t: t, base: s.URL()}
	const far, farSeconds = "P100000D", 100000 * 86400 // 273 years: past 2262 from any now
	total := obj(c.must(201, "POST", "/ojs/v1/jobs", map[string]any{"type": "far.total", "args": []any{},
		"total_timeout": farSeconds, "options": map[string]any{"queue": "far-total"}})["job"])
	c.must(201, "POST", "/ojs/v1/jobs", map[string]any{"type": "far.lease", "args": []any{},
		"timeout": farSeconds, "heartbeat_timeout": farSeconds, "options": map[string]any{"queue": "far-lease"}})
	leased := waitFetch(c, 10*time.Second, "far-lease")
	uniq := map[string]any{"type": "far.unique", "args": []any{}, "options": map[string]any{"queue": "far-unique",
		"unique": map[string]any{"key": "one", "period": far, "on_conflict": "reject"}}}
	c.must(201, "POST", "/ojs/v1/jobs", uniq)

	c.must(201, "POST", "/ojs/v1/jobs", map[string]any{"type": "near.job", "args": []any{},
		"options": map[string]any{"queue": "near", "delay_until": "+PT1S"}})
	waitFetch(c, 30*time.Second, "near")
	if got := obj(c.must(200, "GET", "/ojs/v1/jobs/"+total["id"].(string), nil)["job"])["state"]; got != "available" {
		t.Errorf("job with total_timeout %s is %v, want still available", far, got)
	}
	if got := obj(c.must(200, "GET", "/ojs/v1/jobs/"+leased["id"].(string), nil)["job"])["state"]; got != "active" {
		t.Errorf("job with timeout and heartbeat_timeout %s is %v, want still active", far, got)
	}
	if r := c.do("POST", "/ojs/v1/jobs", uniq); r.status != 409 {
		t.Errorf("second job of unique key with period %s: %d %s, want 409 (the key is still held)", far, r.status, r.raw)
	}
	// The job's record decides when a timer fires, so one that fired at
	// once would only be armed again, and again: the timer itself must
	// stand at the latest time, in a form JetStream keeps exactly. (A
	// lease that long is written later than the claim, design.md; the
	// schedules of every timer are made by one function.)
	_, js := connectApp(t, s)
	timers, err := js.Stream(context.Background(), topology.TimerStream)
	if err != nil {
		t.Fatal(err)
	}
	for kind, id := range map[string]string{topology.TimerExpire: total["id"].(string)} {
		m, err := timers.GetLastMsgForSubject(context.Background(), topology.TimerSchedule(kind, id))
		if err != nil {
			t.Fatalf("%s timer of %s: %v", kind, id, err)
		}
		sched, _ := strings.CutPrefix(m.Header.Get(jetstream.ScheduleHeader), "@at ")
		at, err := time.Parse(time.RFC3339, sched)
		if err != nil || !at.Equal(ojs.LatestTime) || !time.Unix(0, at.UnixNano()).Equal(at) {
			t.Errorf("%s timer of a job with %s deadlines at %q (%v), want %s", kind, far, sched, err, ojs.LatestTimeText)
		}
	}
}
