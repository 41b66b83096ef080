package natsbind_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/jetgate/jetgate/cmd/jetgate/app"
	"github.com/jetgate/jetgate/jetstream/natstest"
)

// fixture is one running jetgate (embedded NATS, HTTP and the NATS API)
// and a NATS connection of a client of it.
type fixture struct {
	t    *testing.T
	srv  *app.Server
	nc   *nats.Conn
	base string
}

// answer is a reply of either binding in one shape: status (200 for a
// NATS success), OJS error code ("" on success), headers and JSON body.
type answer struct {
	status int
	code   string
	header map[string][]string
	body   map[string]any
	raw    string
}

func setup(t *testing.T, cfg app.Config) *fixture {
	t.Helper()
	cfg.DataDir = t.TempDir()
	cfg.HTTPAddr = "127.0.0.1:0"
	cfg.NatsAddr = "127.0.0.1:0"
	lw := natstest.NewLogWriter(t)
	t.Cleanup(lw.Stop)
	return setupLogged(t, cfg, slog.New(slog.NewTextHandler(lw, &slog.HandlerOptions{Level: slog.LevelError})))
}

// setupLogged starts jetgate with cfg as given, logging to log.
func setupLogged(t *testing.T, cfg app.Config, log *slog.Logger) *fixture {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := app.Start(ctx, cfg, log)
	if err != nil {
		t.Fatalf("start jetgate: %v", err)
	}
	nc, err := nats.Connect(s.Embedded().ClientURL(), s.NatsAuth()) // the embedded server's nkey when tokens are set
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		nc.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = s.Shutdown(ctx)
	})
	return &fixture{t: t, srv: s, nc: nc, base: s.URL()}
}

// nats sends body (a string is sent as is, anything else as JSON) to
// "ojs.v1.<op>" with headers hdr ("k", "v", ...).
func (f *fixture) nats(op string, body any, hdr ...string) answer {
	f.t.Helper()
	return f.natsWithin(op, body, 10*time.Second, hdr...)
}

func (f *fixture) natsWithin(op string, body any, timeout time.Duration, hdr ...string) answer {
	f.t.Helper()
	msg := nats.NewMsg("ojs.v1." + op)
	msg.Data = encode(f.t, body)
	for i := 0; i+1 < len(hdr); i += 2 {
		msg.Header.Set(hdr[i], hdr[i+1])
	}
	res, err := f.nc.RequestMsg(msg, timeout)
	if err != nil {
		f.t.Fatalf("nats %s: %v", op, err)
	}
	a := answer{status: 200, header: res.Header, raw: string(res.Data)}
	if v := res.Header.Get(micro.ErrorCodeHeader); v != "" {
		if a.status, err = strconv.Atoi(v); err != nil {
			f.t.Fatalf("nats %s: %s %q", op, micro.ErrorCodeHeader, v)
		}
		a.code = res.Header.Get(micro.ErrorHeader)
	}
	if len(res.Data) > 0 {
		if err := json.Unmarshal(res.Data, &a.body); err != nil {
			f.t.Fatalf("nats %s: reply is not a JSON object: %s", op, res.Data)
		}
	}
	if res.Header.Get("X-Request-Id") == "" || res.Header.Get("OJS-Version") == "" {
		f.t.Fatalf("nats %s: reply without X-Request-Id or OJS-Version", op)
	}
	return a
}

// http sends an HTTP request the way any OJS client does.
func (f *fixture) http(method, path string, body any, hdr ...string) answer {
	f.t.Helper()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(encode(f.t, body))
	}
	req, err := http.NewRequest(method, f.base+path, rd)
	if err != nil {
		f.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/openjobspec+json")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		f.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	a := answer{status: res.StatusCode, header: res.Header, raw: string(raw)}
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &a.body); err != nil {
			f.t.Fatalf("%s %s: body is not a JSON object: %s", method, path, raw)
		}
	}
	if a.status >= 400 {
		a.code, _ = obj(a.body["error"])["code"].(string)
	}
	return a
}

func encode(t *testing.T, body any) []byte {
	switch b := body.(type) {
	case nil:
		return nil
	case string:
		return []byte(b)
	}
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func obj(v any) map[string]any { m, _ := v.(map[string]any); return m }
func list(v any) []any         { l, _ := v.([]any); return l }

// must fails the test unless a is a success.
func (a answer) must(t *testing.T, what string) answer {
	t.Helper()
	if a.status != 200 && a.status != 201 {
		t.Fatalf("%s: status %d %s: %s", what, a.status, a.code, a.raw)
	}
	return a
}

// enqueue enqueues one job of type typ on queue over NATS and returns its id.
func (f *fixture) enqueue(queue string) string {
	f.t.Helper()
	a := f.nats("jobs.enqueue", map[string]any{"type": "test.job", "queue": queue, "args": []any{1}}).must(f.t, "enqueue")
	id, _ := obj(a.body["job"])["id"].(string)
	if id == "" {
		f.t.Fatalf("enqueue: no job id: %s", a.raw)
	}
	return id
}

// fetchAll claims n jobs of queue over NATS, waiting up to 10 s for them.
func (f *fixture) fetchAll(queue string, n int) []string {
	f.t.Helper()
	a := f.nats("workers.fetch", map[string]any{"queues": []string{queue}, "count": n, "wait_ms": 10000}).must(f.t, "fetch")
	var ids []string
	for _, j := range list(a.body["jobs"]) {
		ids = append(ids, obj(j)["id"].(string))
	}
	if len(ids) != n {
		f.t.Fatalf("fetch %d from %s: got %d: %s", n, queue, len(ids), a.raw)
	}
	return ids
}
