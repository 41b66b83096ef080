package natsbind_test

import (
	"strings"
	"testing"

	"github.com/jetgate/jetgate/cmd/jetgate/app"
)

// Issue 20 "fuzzing everything that parses input", over NATS: every
// endpoint sent malformed JSON, a body that is not an object, deep
// nesting, invalid UTF-8 or an oversized body answers a 4xx envelope (never
// a 5xx, never silence); the endpoints that take a name refuse injection
// attempts in it with a 4xx; afterwards the server is healthy and no queue
// was created.
func TestIssue20HostileBodiesOverNATS(t *testing.T) {
	t.Parallel()
	f := setup(t, app.Config{MaxBodyBytes: 64 << 10})
	bad := map[string]string{
		"malformed":    `{"queue":`,
		"not object":   `[1,2,3]`,
		"string":       `"ojs"`,
		"deep":         strings.Repeat(`{"a":`, 20000) + `1` + strings.Repeat(`}`, 20000),
		"invalid utf8": "{\"type\":\"\xff\xfe\",",
		"oversized":    `{"type":"t.x","args":["` + strings.Repeat("x", 70<<10) + `"]}`,
	}
	subjects := f.srv.NatsAPI().Subjects()
	for _, subject := range subjects {
		op := strings.TrimPrefix(subject, "ojs.v1.")
		for name, body := range bad {
			a := f.nats(op, body)
			if a.status < 400 || a.status >= 500 || obj(a.body["error"])["code"] == nil {
				t.Errorf("%s, %s body: %d %s", op, name, a.status, a.raw)
			}
		}
	}
	// Names with subject syntax or separators, in every field that names
	// something (ojs-core.md 4.2 queue names; DESIGN invariant 7).
	names := map[string]string{
		"jobs.get": "id", "jobs.cancel": "id", "jobs.patch": "id", "jobs.activate": "id", "jobs.progress": "id",
		"queues.stats": "queue", "queues.pause": "queue", "queues.resume": "queue", "queues.config": "queue",
		"queues.ratelimit": "queue", "queues.aging": "queue", "admin.queue": "queue",
		"ratelimits.get": "key", "ratelimits.override": "key", "ratelimits.clear": "key",
		"deadletter.retry": "id", "deadletter.delete": "id", "pools.get": "pool", "pools.set": "pool",
		"groups.get": "group", "groups.set": "group", "workflows.get": "id", "cron.get": "name",
		"admin.worker": "id", "workers.health": "id",
	}
	for op, field := range names {
		for _, inj := range []string{"a.>", "*", "a b", "$JS.API.STREAM.LIST", "..", ".", "", strings.Repeat("q", 300), "a\x00b"} {
			a := f.nats(op, map[string]any{field: inj, "concurrency": 1, "queues": []string{"q"}, "strategy": "strict"})
			if a.status < 400 || a.status >= 500 {
				t.Errorf("%s {%q: %q}: %d %s", op, field, inj, a.status, a.raw)
			}
		}
	}
	f.nats("health", nil).must(t, "health after hostile input")
	q := f.nats("queues.list", nil).must(t, "queues")
	if qs := list(q.body["queues"]); len(qs) != 0 {
		t.Fatalf("hostile input created queues: %s", q.raw)
	}
}
