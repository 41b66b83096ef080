package natsbind_test

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/jetgate/jetgate/cmd/jetgate/app"
)

const (
	producerTok = "prod-secret-7f3a"
	workerTok   = "work-secret-91c2"
	adminTok    = "admin-secret-c0de"
)

// Issue 19 / issue 20 access control over NATS: with tokens configured,
// "Authorization: Bearer <token>" is checked per endpoint with the role
// table HTTP uses; no or an unknown token answers 401 unauthorized (with
// WWW-Authenticate), a token of another role 403 forbidden naming the
// roles allowed; health stays open; the answers match HTTP's.
func TestIssue19AuthRefusals(t *testing.T) {
	t.Parallel()
	f := setup(t, app.Config{ProducerTokens: []string{producerTok}, WorkerTokens: []string{workerTok}, AdminTokens: []string{adminTok}})
	bearer := func(tok string) []string { return []string{"Authorization", "Bearer " + tok} }
	fetch := map[string]any{"queues": []string{"auth"}}

	if a := f.nats("health", nil); a.status != 200 {
		t.Fatalf("health without token: %d %s", a.status, a.raw)
	}
	for _, tc := range []struct {
		name   string
		op     string
		body   any
		hdr    []string
		status int
		code   string
	}{
		{"no token", "workers.fetch", fetch, nil, 401, "unauthorized"},
		{"unknown token", "workers.fetch", fetch, bearer("nope"), 401, "unauthorized"},
		{"not bearer", "workers.fetch", fetch, []string{"Authorization", "Basic " + workerTok}, 401, "unauthorized"},
		{"producer fetches", "workers.fetch", fetch, bearer(producerTok), 403, "forbidden"},
		{"worker enqueues", "jobs.enqueue", job(nil), bearer(workerTok), 403, "forbidden"},
		{"producer lists queues", "queues.list", nil, bearer(producerTok), 403, "forbidden"},
		{"worker batch acks", "workers.ackbatch", map[string]any{"acks": []any{map[string]any{"job_id": unknownID}}}, bearer(workerTok), 200, ""},
		{"producer batch acks", "workers.ackbatch", map[string]any{"acks": []any{map[string]any{"job_id": unknownID}}}, bearer(producerTok), 403, "forbidden"},
		{"worker fetches", "workers.fetch", fetch, bearer(workerTok), 200, ""},
		{"scheme case", "workers.fetch", fetch, []string{"Authorization", "bEaReR " + workerTok}, 200, ""},
		{"header name case", "workers.fetch", fetch, []string{"authorization", "Bearer " + workerTok}, 200, ""},
		{"producer enqueues", "jobs.enqueue", job(nil), bearer(producerTok), 200, ""},
		{"admin lists queues", "queues.list", nil, bearer(adminTok), 200, ""},
	} {
		a := f.nats(tc.op, tc.body, tc.hdr...)
		if a.status != tc.status || a.code != tc.code {
			t.Errorf("%s: %d %q, want %d %q: %s", tc.name, a.status, a.code, tc.status, tc.code, a.raw)
			continue
		}
		if strings.Contains(a.raw, producerTok) || strings.Contains(a.raw, workerTok) {
			t.Errorf("%s: reply echoes a token", tc.name)
		}
		switch tc.status {
		case 401:
			if len(a.header["WWW-Authenticate"]) == 0 {
				t.Errorf("%s: 401 without WWW-Authenticate: %v", tc.name, a.header)
			}
		case 403:
			d := obj(obj(a.body["error"])["details"])
			if len(list(d["required_roles"])) == 0 || d["role"] == nil {
				t.Errorf("%s: 403 details %v, want role and required_roles", tc.name, d)
			}
		}
	}
	// The same refusal over HTTP: same status, code and details.
	h := f.http("POST", "/ojs/v1/workers/fetch", fetch, "Authorization", "Bearer "+producerTok)
	n := f.nats("workers.fetch", fetch, bearer(producerTok)...)
	hd, nd := obj(obj(h.body["error"])["details"]), obj(obj(n.body["error"])["details"])
	if h.status != n.status || h.code != n.code || hd["role"] != nd["role"] ||
		strings.Join(toStrings(hd["required_roles"]), ",") != strings.Join(toStrings(nd["required_roles"]), ",") {
		t.Fatalf("HTTP %d %v vs NATS %d %v", h.status, hd, n.status, nd)
	}
}

func toStrings(v any) []string {
	var out []string
	for _, x := range list(v) {
		out = append(out, x.(string))
	}
	return out
}

// Tokens are never logged: a refused and an accepted request at debug
// level leave no token in jetgate's log.
func TestIssue19TokensNeverLogged(t *testing.T) {
	t.Parallel()
	var buf syncBuffer
	cfg := app.Config{WorkerTokens: []string{workerTok}, DataDir: t.TempDir(), HTTPAddr: "127.0.0.1:0", NatsAddr: "127.0.0.1:0"}
	f := setupLogged(t, cfg, slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})))
	f.nats("workers.fetch", map[string]any{"queues": []string{"l"}}, "Authorization", "Bearer "+workerTok).must(t, "fetch")
	f.nats("workers.fetch", map[string]any{"queues": []string{"l"}}, "Authorization", "Bearer "+workerTok+"x")
	f.nats("workers.fetch", map[string]any{"queues": []string{"l"}}, "Authorization", "Bearer "+producerTok)
	if s := buf.String(); strings.Contains(s, workerTok) || strings.Contains(s, producerTok) {
		t.Fatal("a bearer token appears in the log")
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
