package dashboard_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/jetgate/jetgate/cmd/jetgate/app"
)

// The dashboard's feeder and streams stop with the server (STYLE 14).
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// server is a real jetgate (embedded NATS, real listener) and a plain HTTP
// client for it.
type server struct {
	t     testing.TB
	app   *app.Server
	base  string
	token string // sent as a bearer token by call
	logs  *logBuffer
}

func start(t testing.TB, cfg app.Config) *server {
	t.Helper()
	cfg.DataDir = t.TempDir()
	cfg.HTTPAddr, cfg.NatsAddr = "127.0.0.1:0", "127.0.0.1:0"
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	logs := &logBuffer{}
	s, err := app.Start(ctx, cfg, slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	if err != nil {
		t.Fatalf("start jetgate: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = s.Shutdown(ctx)
	})
	return &server{t: t, app: s, base: s.URL(), logs: logs}
}

// logBuffer keeps every log line of the server, so a test can look for a
// token in them.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// call sends a request with the server's bearer token (if any) and
// returns the status, headers and body.
func (s *server) call(method, path string, body any) (int, http.Header, []byte) {
	s.t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			s.t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, s.base+path, rd)
	if err != nil {
		s.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if s.token != "" {
		req.Header.Set("Authorization", "Bearer "+s.token)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	return res.StatusCode, res.Header, raw
}

func (s *server) must(status int, method, path string, body any) map[string]any {
	s.t.Helper()
	got, _, raw := s.call(method, path, body)
	if got != status {
		s.t.Fatalf("%s %s: status %d, want %d: %s", method, path, got, status, raw)
	}
	var m map[string]any
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &m); err != nil {
			s.t.Fatalf("%s %s: %v: %s", method, path, err, raw)
		}
	}
	return m
}

func (s *server) enqueue(queue string, opts map[string]any) string {
	s.t.Helper()
	o := map[string]any{"queue": queue}
	for k, v := range opts {
		o[k] = v
	}
	b := s.must(201, "POST", "/ojs/v1/jobs", map[string]any{"type": "dash.test", "args": []any{1}, "options": o})
	return obj(b["job"])["id"].(string)
}

func (s *server) fetch(queue string) map[string]any {
	s.t.Helper()
	b := s.must(200, "POST", "/ojs/v1/workers/fetch", map[string]any{"queues": []string{queue}, "count": 1, "worker_id": "dash-worker"})
	if jobs := list(b["jobs"]); len(jobs) > 0 {
		return obj(jobs[0])
	}
	return nil
}

// snapshot reads GET /dashboard/snapshot.
func (s *server) snapshot() map[string]any {
	s.t.Helper()
	status, h, raw := s.call("GET", "/dashboard/snapshot", nil)
	if status != 200 || h.Get("Content-Type") != "application/json" {
		s.t.Fatalf("snapshot: %d %s: %s", status, h.Get("Content-Type"), raw)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		s.t.Fatalf("snapshot is not JSON: %v: %s", err, raw)
	}
	return m
}

// eventually polls f until it returns "" (done) or the deadline passes,
// then fails with f's last answer.
func eventually(t testing.TB, within time.Duration, f func() string) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		why := f()
		if why == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not within %s: %s", within, why)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func obj(v any) map[string]any { m, _ := v.(map[string]any); return m }
func list(v any) []any         { l, _ := v.([]any); return l }

func queueRow(snap map[string]any, name string) map[string]any {
	for _, q := range list(snap["queues"]) {
		if obj(q)["name"] == name {
			return obj(q)
		}
	}
	return nil
}

// sseEvent is one server-sent event.
type sseEvent struct {
	name string
	data string
}

// openStream opens GET /dashboard/stream and delivers its events on the
// returned channel, closed when the stream ends.
func (s *server) openStream(ctx context.Context, header http.Header) (*http.Response, <-chan sseEvent) {
	s.t.Helper()
	req, err := http.NewRequestWithContext(ctx, "GET", s.base+"/dashboard/stream", nil)
	if err != nil {
		s.t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatalf("open stream: %v", err)
	}
	out := make(chan sseEvent, 64)
	go func() {
		defer close(out)
		defer res.Body.Close()
		sc := bufio.NewScanner(res.Body)
		sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
		var ev sseEvent
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if ev.name != "" || ev.data != "" {
					select {
					case out <- ev:
					case <-ctx.Done():
						return
					}
				}
				ev = sseEvent{}
			case strings.HasPrefix(line, "event: "):
				ev.name = line[len("event: "):]
			case strings.HasPrefix(line, "data: "):
				ev.data += line[len("data: "):]
			}
		}
	}()
	return res, out
}
