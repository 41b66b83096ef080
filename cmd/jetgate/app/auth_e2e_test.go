package app_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/jetgate/jetgate/cmd/jetgate/app"
)

// authDo sends one request with "Authorization: Bearer token" (none when
// token is "") and returns the status and the decoded body.
func authDo(t *testing.T, base, token, method, path string, body any) (int, map[string]any) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, base+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/openjobspec+json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	var m map[string]any
	if len(raw) > 0 && res.Header.Get("Content-Type") == "application/openjobspec+json" {
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatalf("%s %s: body is not JSON: %s", method, path, raw)
		}
	}
	if res.StatusCode == http.StatusUnauthorized && res.Header.Get("WWW-Authenticate") == "" {
		t.Errorf("%s %s: 401 without WWW-Authenticate", method, path)
	}
	return res.StatusCode, m
}

// TestAuthRolesE2E runs a real jetgate with tokens from a file and from
// the config (issue 20 access control): each role does its part of a
// job's life; each refusal is 401 (no or unknown token) or 403 (role not
// allowed) with the error envelope; /health and /ready stay open.
func TestAuthRolesE2E(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(file, []byte("# jetgate tokens\nproducer prod-file\nworker work-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startApp(t, app.Config{AuthTokensFile: file, ProducerTokens: []string{"prod-flag"}, AdminTokens: []string{"adm"}})
	base := s.URL()

	refused := func(wantStatus int, wantCode, token, method, path string, body any) {
		t.Helper()
		st, b := authDo(t, base, token, method, path, body)
		e := obj(b["error"])
		if st != wantStatus || e["code"] != wantCode || e["hint"] == "" {
			t.Errorf("%s %s with %q: %d %v, want %d %s with a hint", method, path, token, st, b, wantStatus, wantCode)
		}
	}
	ok := func(wantStatus int, token, method, path string, body any) map[string]any {
		t.Helper()
		st, b := authDo(t, base, token, method, path, body)
		if st != wantStatus {
			t.Fatalf("%s %s with %q: %d %v, want %d", method, path, token, st, b, wantStatus)
		}
		return b
	}

	// Open routes.
	ok(200, "", "GET", "/health", nil)
	ok(200, "", "GET", "/ready", nil)
	ok(200, "", "GET", "/ojs/manifest", nil)

	job := map[string]any{"type": "auth.test", "queue": "auth", "args": []any{1}}
	// 401: no token, unknown token.
	refused(401, "unauthorized", "", "POST", "/ojs/v1/jobs", job)
	refused(401, "unauthorized", "nope", "POST", "/ojs/v1/jobs", job)
	refused(401, "unauthorized", "", "POST", "/ojs/v1/workers/fetch", map[string]any{"queues": []string{"auth"}})

	// Producer (file and flag tokens): enqueue, read.
	id := obj(ok(201, "prod-file", "POST", "/ojs/v1/jobs", job)["job"])["id"].(string)
	ok(200, "prod-flag", "GET", "/ojs/v1/jobs/"+id, nil)
	// 403: producer may not fetch nor administer; worker may not enqueue nor read jobs.
	refused(403, "forbidden", "prod-flag", "POST", "/ojs/v1/workers/fetch", map[string]any{"queues": []string{"auth"}})
	refused(403, "forbidden", "prod-file", "GET", "/ojs/v1/queues", nil)
	refused(403, "forbidden", "prod-file", "GET", "/metrics", nil)
	refused(403, "forbidden", "work-file", "POST", "/ojs/v1/jobs", job)
	refused(403, "forbidden", "work-file", "GET", "/ojs/v1/jobs/"+id, nil)
	refused(403, "forbidden", "work-file", "POST", "/ojs/v1/queues/auth/pause", nil)

	// Worker: fetch, heartbeat, progress, ack.
	jobs := list(ok(200, "work-file", "POST", "/ojs/v1/workers/fetch", map[string]any{"queues": []string{"auth"}, "count": 1})["jobs"])
	if len(jobs) != 1 || obj(jobs[0])["id"] != id {
		t.Fatalf("worker fetched %v, want job %s", jobs, id)
	}
	ok(200, "work-file", "POST", "/ojs/v1/workers/heartbeat", map[string]any{"job_ids": []string{id}, "worker_id": "w"})
	ok(200, "work-file", "POST", "/ojs/v1/workers/ack", map[string]any{"job_id": id, "result": map[string]any{"ok": true}})

	// Admin: everything, including the other roles' routes.
	ok(200, "adm", "GET", "/ojs/v1/queues", nil)
	ok(200, "adm", "GET", "/ojs/v1/jobs/"+id, nil)
	ok(200, "adm", "GET", "/metrics", nil)
}

// TestAuthBadTokensFile: a malformed tokens file stops the start, and the
// error never contains a token.
func TestAuthBadTokensFile(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(file, []byte("root topsecret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := app.Start(t.Context(), app.Config{DataDir: t.TempDir(), HTTPAddr: "127.0.0.1:0", NatsAddr: "127.0.0.1:0", AuthTokensFile: file}, nil)
	if err == nil {
		t.Fatal("jetgate started with a tokens file naming role root")
	}
	if bytes.Contains([]byte(err.Error()), []byte("topsecret")) {
		t.Fatalf("the error echoes the token: %v", err)
	}
}

// TestEmbeddedNATSToken (issue 20: the embedded NATS listener can require
// a token): with NatsAuthToken set, jetgate itself connects and serves,
// while a NATS client without the token, or with a wrong one, is refused
// and one with it connects.
func TestEmbeddedNATSToken(t *testing.T) {
	t.Parallel()
	s := startApp(t, app.Config{NatsAuthToken: "nats-secret"})
	if st, _ := authDo(t, s.URL(), "", "GET", "/ready", nil); st != 200 {
		t.Fatalf("GET /ready: %d, want 200 (jetgate's own connection carries the token)", st)
	}
	url := s.Embedded().ClientURL()
	for name, opts := range map[string][]nats.Option{
		"no token":    nil,
		"wrong token": {nats.Token("guess")},
	} {
		nc, err := nats.Connect(url, append(opts, nats.MaxReconnects(0))...)
		if err == nil {
			nc.Close()
			t.Errorf("%s: connected to the embedded server", name)
		} else if !errors.Is(err, nats.ErrAuthorization) && !strings.Contains(strings.ToLower(err.Error()), "authorization") {
			t.Errorf("%s: error %v, want an authorization violation", name, err)
		}
	}
	nc, err := nats.Connect(url, nats.Token("nats-secret"))
	if err != nil {
		t.Fatalf("with the token: %v", err)
	}
	nc.Close()
}

// TestNATSAuthTokenNeedsEmbedded: --nats-auth-token with --nats-url is a
// configuration error, not silently ignored.
func TestNATSAuthTokenNeedsEmbedded(t *testing.T) {
	t.Parallel()
	_, err := app.Start(t.Context(), app.Config{NatsURL: "nats://127.0.0.1:1", NatsAuthToken: "x", HTTPAddr: "127.0.0.1:0"}, nil)
	if err == nil || !strings.Contains(err.Error(), "nats-auth-token") {
		t.Fatalf("err = %v, want one naming --nats-auth-token", err)
	}
}
