package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetgate/jetgate/cmd/jetgate/app"
	"github.com/jetgate/jetgate/jetstream/natstest"
)

// referencedRoutes reads "METHOD /path" from the headings of
// docs/reference.md, which httpbind's TestReferenceNamesEveryRoute and
// TestReferenceRoutesAreServed keep equal to the router's routes: a new
// route is covered here as soon as it is documented (and it must be).
// Same reading rules as httpbind's referenceRoutes: "`.../y`" replaces the
// last segment of the previous path, a span of methods alone reuses it.
func referencedRoutes(t testing.TB) []string {
	t.Helper()
	doc, err := os.ReadFile("../../../docs/reference.md")
	if err != nil {
		t.Fatal(err)
	}
	codeRE := regexp.MustCompile("`([^`]+)`")
	methodsRE := regexp.MustCompile(`^((?:GET|PUT|POST|PATCH|DELETE)(?:/(?:GET|PUT|POST|PATCH|DELETE))*)(?:\s+(\S+))?$`)
	var out []string
	for line := range strings.SplitSeq(string(doc), "\n") {
		if !strings.HasPrefix(line, "#") {
			continue
		}
		var methods []string
		var path string
		for _, m := range codeRE.FindAllStringSubmatch(line, -1) {
			span := strings.TrimSpace(m[1])
			if strings.HasPrefix(span, ".../") && path != "" {
				path = path[:strings.LastIndex(path, "/")] + span[3:]
			} else if mm := methodsRE.FindStringSubmatch(span); mm != nil {
				methods = strings.Split(mm[1], "/")
				if mm[2] != "" {
					path = mm[2]
				}
			} else {
				continue
			}
			if !strings.HasPrefix(path, "/") {
				continue
			}
			for _, meth := range methods {
				out = append(out, meth+" "+path)
			}
		}
	}
	slices.Sort(out)
	out = slices.Compact(out)
	if len(out) < 50 {
		t.Fatalf("only %d routes read from docs/reference.md; the reading is broken", len(out))
	}
	return out
}

// natsState is what a request could create or change on the NATS side:
// stream names with their consumer counts, and the keys of every KV
// bucket (OJS_QUEUES, OJS_LIMITS, ...).
func natsState(t *testing.T, js jetstream.JetStream) map[string]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out := map[string]string{}
	l := js.ListStreams(ctx)
	for si := range l.Info() {
		name := si.Config.Name
		out["stream "+name] = fmt.Sprint(si.State.Consumers, " consumers")
		if !strings.HasPrefix(name, "KV_") {
			continue
		}
		kv, err := js.KeyValue(ctx, strings.TrimPrefix(name, "KV_"))
		if err != nil {
			t.Fatal(err)
		}
		keys, err := kv.ListKeys(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for k := range keys.Keys() {
			out["key "+name+" "+k] = "present"
		}
	}
	if err := l.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// hostileNames are path parameters and queue/key names that must never
// become a subject, a KV key or a stream: NATS wildcards and separators,
// the JetStream API prefix, dots, spaces and the empty name.
var hostileNames = []string{">", "*", ".", "..", " ", "a b", "$JS.API.>", "a.>", "", "%00"}

// TestHostileInputEveryRoute (issue 20, ojs-http-binding.md 7 error
// envelope): every route of the binding gets malformed JSON, wrong types,
// huge numbers, 10,000 levels of nesting, a body above --max-body-bytes,
// invalid UTF-8, and hostile names in its path parameters and in
// queue/key fields. Each answer is a 4xx with the error envelope (code,
// message, hint); afterwards /ready is 200 and no stream, consumer or KV
// key was created or removed.
func TestHostileInputEveryRoute(t *testing.T) {
	t.Parallel()
	const maxBody = 64 << 10
	s := startApp(t, app.Config{MaxBodyBytes: maxBody})
	_, js := natstest.ConnectURL(t, s.NatsURL())
	c := client{t: t, base: s.URL()}
	// Reads start captures and caches lazily; do one of each kind first so
	// that "before" already has them.
	c.must(200, "GET", "/ojs/v1/events", nil)
	c.must(200, "GET", "/ojs/v1/queues", nil)
	before := natsState(t, js)

	deep := strings.Repeat("[", 10000) + strings.Repeat("]", 10000)
	deepObj := strings.Repeat(`{"a":`, 10000) + "1" + strings.Repeat("}", 10000)
	bodies := []struct{ name, body string }{
		{"malformed JSON", `{"queues":["a"`},
		{"trailing garbage", `{} {}`},
		{"wrong type array", `[]`},
		{"wrong type string", `"x"`},
		{"null", `null`},
		{"wrong field types", `{"type":1,"args":"x","queues":"a","count":"1","job_id":[],"key":{},"priority":"high","progress":"x","confirm":"yes","schedule":7}`},
		{"huge float", `{"type":"a.b","args":[],"count":1e400,"priority":1e400,"concurrency":1e400,"progress":1e400,"max_size":1e400}`},
		{"2^64", `{"type":"a.b","args":[],"count":18446744073709551616,"priority":18446744073709551616,"concurrency":18446744073709551616,"max_size":18446744073709551616}`},
		{"deep array", deep},
		{"deep object", deepObj},
		{"oversized", `{"type":"a.b","args":["` + strings.Repeat("x", maxBody+1024) + `"]}`},
		{"invalid UTF-8", "{\"type\":\"a.\xff\xfe\",\"args\":[\"\xc3\x28\"],\"queues\":[\"\xff\"],\"key\":\"\xff\"}"},
	}
	for _, n := range hostileNames {
		q, _ := json.Marshal(n)
		bodies = append(bodies, struct{ name, body string }{"name " + n, fmt.Sprintf(
			`{"type":"a.b","args":[],"options":{"queue":%s,"rate_limit":{"key":%[1]s,"concurrency":1}},"queues":[%[1]s],"count":1,"key":%[1]s,"name":%[1]s,"queue":%[1]s,"group":%[1]s,"pool":%[1]s,"worker_id":%[1]s,"job_id":%[1]s}`, q)})
	}

	routes := referencedRoutes(t)
	pathVar := regexp.MustCompile(`\{[^}]*\}`)
	requests := 0
	send := func(method, path, body string, wantClient bool) {
		t.Helper()
		requests++
		req, err := http.NewRequest(method, s.URL()+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/openjobspec+json")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		raw, _ := io.ReadAll(res.Body)
		res.Body.Close()
		what := fmt.Sprintf("%s %s (%.60q)", method, path, body)
		if res.StatusCode >= 500 {
			t.Errorf("%s: status %d: %s", what, res.StatusCode, raw)
			return
		}
		if res.StatusCode < 400 {
			if wantClient {
				t.Errorf("%s: status %d, want 4xx: %.300s", what, res.StatusCode, raw)
			}
			return
		}
		var env struct {
			Error map[string]any `json:"error"`
		}
		if json.Unmarshal(raw, &env) != nil {
			t.Errorf("%s: %d without a JSON body: %.300s", what, res.StatusCode, raw)
			return
		}
		for _, f := range []string{"code", "message", "hint"} {
			if v, _ := env.Error[f].(string); v == "" {
				t.Errorf("%s: %d envelope without error.%s: %.300s", what, res.StatusCode, f, raw)
			}
		}
	}
	for _, rt := range routes {
		method, tmpl, _ := strings.Cut(rt, " ")
		if tmpl == "/metrics" || strings.HasSuffix(tmpl, "/stream") {
			continue // not JSON (Prometheus text, server-sent events)
		}
		// Path parameters: a plausible id, then each hostile name.
		plain := pathVar.ReplaceAllString(tmpl, "019414d4-8b2e-7c3a-b5d1-f0e2a3b4c5d6")
		if strings.Contains(tmpl, "bulk/{") {
			plain = pathVar.ReplaceAllString(tmpl, "retry")
		}
		hasVar := plain != tmpl
		// Pausing and resuming a queue reads no body, and a plausible name
		// is a valid queue: those get only the hostile names below.
		bodyless := strings.HasSuffix(tmpl, "/pause") || strings.HasSuffix(tmpl, "/resume")
		if !bodyless && (method == http.MethodPost || method == http.MethodPut || method == http.MethodPatch) {
			for _, b := range bodies {
				send(method, plain, b.body, true)
			}
		}
		if hasVar {
			for _, n := range hostileNames {
				p := pathVar.ReplaceAllString(tmpl, url.PathEscape(n))
				// A hostile name in the path with a well-formed body is a
				// 4xx (unknown or invalid name); for reads, a name that is
				// merely unknown may also be an empty 200 — but nothing
				// may change (checked below).
				mutating := method != http.MethodGet
				send(method, p, `{"type":"a.b","args":[],"concurrency":1,"confirm":true}`, mutating)
			}
		}
	}
	if r := c.do("GET", "/ready", nil); r.status != 200 {
		t.Fatalf("GET /ready after hostile input: %d %s", r.status, r.raw)
	}
	after := natsState(t, js)
	for k, v := range after {
		if before[k] != v {
			t.Errorf("hostile input changed NATS state: %s: %q, was %q", k, v, before[k])
		}
	}
	for k, v := range before {
		if _, ok := after[k]; !ok {
			t.Errorf("hostile input removed %s (%s)", k, v)
		}
	}
	t.Logf("%d routes, %d requests", len(routes), requests)
}

// FuzzEveryRoute sends arbitrary path parameters and bodies to every
// documented route of one real jetgate (embedded NATS): whatever the input,
// the answer is never a 5xx, is JSON, and every 4xx is the error envelope
// with code, message and hint (ojs-http-binding.md 7); jetgate stays
// ready. Valid input may change state: this target is about answers.
func FuzzEveryRoute(f *testing.F) {
	s := startApp(f, app.Config{})
	var routes []string
	for _, rt := range referencedRoutes(f) {
		if !strings.HasSuffix(rt, " /metrics") && !strings.HasSuffix(rt, "/stream") {
			routes = append(routes, rt)
		}
	}
	for i := range routes {
		f.Add(uint16(i), "email", []byte(`{"type":"email.send","args":["a@b"],"options":{"queue":"email"}}`))
	}
	for _, n := range hostileNames {
		f.Add(uint16(0), n, []byte(`{"queues":["`+n+`"],"count":1}`))
	}
	f.Add(uint16(3), "x", []byte(`{"concurrency":1e400,"rate":{"limit":18446744073709551616,"period":"PT1S"}}`))
	f.Add(uint16(5), "q", []byte("{\"max_size\":\"\xff\"}"))
	// Issue 31: a key given twice and text that is not UTF-8, deep inside.
	f.Add(uint16(1), "q", []byte(`{"type":"a","args":[{"k":1,"k":2}]}`))
	f.Add(uint16(2), "q", []byte(`{"type":"a","args":[],"meta":{"n":"\ud800"}}`))
	pathVar := regexp.MustCompile(`\{[^}]*\}`)
	hc := &http.Client{Timeout: 10 * time.Second}
	f.Fuzz(func(t *testing.T, route uint16, name string, body []byte) {
		method, tmpl, _ := strings.Cut(routes[int(route)%len(routes)], " ")
		path := pathVar.ReplaceAllLiteralString(tmpl, url.PathEscape(name))
		req, err := http.NewRequest(method, s.URL()+path, strings.NewReader(string(body)))
		if err != nil {
			return // not a URL (the name escapes but the template may not)
		}
		req.Header.Set("Content-Type", "application/openjobspec+json")
		res, err := hc.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		raw, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode >= 500 {
			t.Fatalf("%s %s %q: status %d: %s", method, path, body, res.StatusCode, raw)
		}
		if len(raw) > 0 && !json.Valid(raw) {
			t.Fatalf("%s %s %q: answer is not JSON: %.300s", method, path, body, raw)
		}
		if res.StatusCode >= 400 {
			var env struct {
				Error map[string]any `json:"error"`
			}
			_ = json.Unmarshal(raw, &env)
			for _, k := range []string{"code", "message", "hint"} {
				if v, _ := env.Error[k].(string); v == "" {
					t.Fatalf("%s %s %q: %d without error.%s: %.300s", method, path, body, res.StatusCode, k, raw)
				}
			}
		}
	})
}
