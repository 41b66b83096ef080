package httpbind

import (
	"strings"
	"testing"

	"github.com/jetgate/jetgate/admission/authz"
)

// TestEveryRouteHasAnOp: every served route is classified explicitly in
// routeOps (issue 20: a role table covering every route), so a new route
// without a role fails here instead of silently needing admin; and no
// entry names a route that is not served.
func TestEveryRouteHasAnOp(t *testing.T) {
	served := map[string]bool{}
	for _, r := range servedRoutes(t) {
		served[r] = true
		if _, ok := routeOps[r]; !ok {
			t.Errorf("%s is served but has no operation class in routeOps (httpbind/auth.go)", r)
		}
	}
	for r := range routeOps {
		if !served[r] {
			t.Errorf("routeOps lists %s, which is not served", r)
		}
	}
}

func authBundle(t *testing.T) bundle {
	t.Helper()
	k, err := authz.NewKeyring(map[authz.Role][]string{
		authz.RoleProducer: {"prod-1", "prod-2"}, authz.RoleWorker: {"work-1"}, authz.RoleAdmin: {"admin-1"},
	})
	if err != nil {
		t.Fatal(err)
	}
	return setup(t, Config{Auth: k})
}

// TestAuthRefusals (issue 20: every refused request is 401/403 with the
// error envelope): no header, a wrong scheme and an unknown token answer
// 401 unauthorized with WWW-Authenticate: Bearer; a known token of a role
// not allowed answers 403 forbidden; the token never reaches the log.
func TestAuthRefusals(t *testing.T) {
	b := authBundle(t)
	for name, c := range map[string]struct {
		method, path, auth string
		status             int
		code               string
	}{
		"no token":        {"POST", "/ojs/v1/jobs", "", 401, "unauthorized"},
		"basic scheme":    {"POST", "/ojs/v1/jobs", "Basic cHJvZC0xOg==", 401, "unauthorized"},
		"unknown token":   {"GET", "/ojs/v1/jobs/x", "Bearer secret-guess", 401, "unauthorized"},
		"token prefix":    {"GET", "/ojs/v1/jobs/x", "Bearer prod-", 401, "unauthorized"},
		"producer fetch":  {"POST", "/ojs/v1/workers/fetch", "Bearer prod-1", 403, "forbidden"},
		"producer admin":  {"GET", "/ojs/v1/dead-letter", "Bearer prod-2", 403, "forbidden"},
		"worker enqueue":  {"POST", "/ojs/v1/jobs", "Bearer work-1", 403, "forbidden"},
		"worker get job":  {"GET", "/ojs/v1/jobs/x", "Bearer work-1", 403, "forbidden"},
		"worker pause":    {"POST", "/ojs/v1/queues/q/pause", "Bearer work-1", 403, "forbidden"},
		"producer queues": {"GET", "/ojs/v1/queues", "Bearer prod-1", 403, "forbidden"},
	} {
		r := b.do(t, c.method, c.path, "", map[string]string{"Authorization": c.auth})
		if r.StatusCode != c.status {
			t.Errorf("%s: status %d, want %d (%s)", name, r.StatusCode, c.status, r.raw)
			continue
		}
		e, _ := r.body["error"].(map[string]any)
		if e == nil || e["code"] != c.code || e["hint"] == "" || e["request_id"] == "" {
			t.Errorf("%s: envelope %s, want code %s with hint and request_id", name, r.raw, c.code)
		}
		if got := r.Header.Get("WWW-Authenticate"); (c.status == 401) != strings.HasPrefix(got, "Bearer") {
			t.Errorf("%s: WWW-Authenticate %q", name, got)
		}
	}
	for _, tok := range []string{"secret-guess", "prod-1", "prod-2", "work-1", "cHJvZC0x"} {
		if strings.Contains(b.logs.String(), tok) {
			t.Errorf("the log contains the token %q", tok)
		}
	}
	if len(b.fake.called()) != 0 {
		t.Errorf("refused requests reached the backend: %v", b.fake.called())
	}
}

// TestAuthAllows: each role reaches its routes (issue 20 role table), the
// open routes need no token, and the scheme is case-insensitive (RFC 6750).
func TestAuthAllows(t *testing.T) {
	b := authBundle(t)
	for name, c := range map[string]struct{ method, path, auth string }{
		"health open":     {"GET", "/health", ""},
		"ojs health open": {"GET", "/ojs/v1/health", ""},
		"manifest open":   {"GET", "/ojs/manifest", ""},
		"producer get":    {"GET", "/ojs/v1/jobs/x", "Bearer prod-1"},
		"producer 2 get":  {"GET", "/ojs/v1/jobs/x", "bearer prod-2"},
		"admin get":       {"GET", "/ojs/v1/jobs/x", "Bearer admin-1"},
		"worker fetch":    {"POST", "/ojs/v1/workers/fetch", "Bearer work-1"},
		"admin fetch":     {"POST", "/ojs/v1/workers/fetch", "Bearer admin-1"},
		"admin queues":    {"GET", "/ojs/v1/queues", "Bearer admin-1"},
	} {
		r := b.do(t, c.method, c.path, "", map[string]string{"Authorization": c.auth})
		if r.StatusCode == 401 || r.StatusCode == 403 {
			t.Errorf("%s: refused %d %s", name, r.StatusCode, r.raw)
		}
	}
}

// TestAuthOff: without Config.Auth (no tokens configured) nothing is
// refused, today's behaviour.
func TestAuthOff(t *testing.T) {
	b := setup(t, Config{})
	r := b.do(t, "GET", "/ojs/v1/queues", "", map[string]string{"Authorization": ""})
	if r.StatusCode == 401 || r.StatusCode == 403 {
		t.Fatalf("auth off refused: %d %s", r.StatusCode, r.raw)
	}
}
