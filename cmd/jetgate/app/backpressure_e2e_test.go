package app_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jetgate/jetgate/cmd/jetgate/app"
)

// The server-wide default bound (--queue-max-depth, --queue-overflow)
// reaches every queue without its own, over HTTP; the manifest declares
// the extension; a bad default strategy refuses to start.
func TestDefaultQueueBound(t *testing.T) {
	t.Parallel()
	s := startApp(t, app.Config{QueueMaxDepth: 2, QueueOverflow: "reject"})
	c := client{t: t, base: s.URL()}
	job := map[string]any{"type": "t.x", "args": []any{}, "options": map[string]any{"queue": "dflt"}}
	c.must(201, "POST", "/ojs/v1/jobs", job)
	r := c.do("POST", "/ojs/v1/jobs", job)
	if r.status != 201 || r.header.Get("X-OJS-Queue-Pressure") != "1" {
		t.Fatalf("second enqueue: %d %v", r.status, r.header)
	}
	r = c.do("POST", "/ojs/v1/jobs", job)
	if r.status != 429 || r.header.Get("Retry-After") == "" || r.header.Get("X-OJS-Queue-Max-Depth") != "2" {
		t.Fatalf("third enqueue: %d %v %s", r.status, r.header, r.raw)
	}
	cfg := c.must(200, "GET", "/ojs/v1/admin/queues/dflt/config", nil)
	if cfg["source"] != "default" {
		t.Fatalf("config: %v", cfg)
	}
	m := c.must(200, "GET", "/ojs/manifest", nil)
	if !strings.Contains(strings.Join(toStrings(m["extensions"]), ","), "urn:ojs:ext:backpressure") {
		t.Fatalf("manifest extensions: %v", m["extensions"])
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := app.Start(ctx, app.Config{DataDir: t.TempDir(), QueueOverflow: "drop_newest"}, nil); err == nil ||
		!strings.Contains(err.Error(), "strategy") {
		t.Fatalf("start with a bad --queue-overflow: %v", err)
	}
}

func toStrings(v any) []string {
	var out []string
	for _, x := range v.([]any) {
		out = append(out, x.(string))
	}
	return out
}
