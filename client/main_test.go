package client_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"go.uber.org/goleak"

	"github.com/jetgate/jetgate/client"
	"github.com/jetgate/jetgate/cmd/jetgate/app"
)

// Workers, clients and the jetgate they talk to leave no goroutine
// behind (STYLE item 14).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// env is a real jetgate (embedded NATS, HTTP on a free port) and a client
// of it over one binding.
type env struct {
	srv  *app.Server
	c    *client.Client
	kind string
	// rt counts the HTTP answers by status (HTTP clients only).
	rt *countingRT
}

// startServer starts jetgate in-process on free ports, stopped by
// t.Cleanup.
func startServer(t testing.TB, cfg app.Config) *app.Server {
	t.Helper()
	cfg.DataDir = t.TempDir()
	cfg.HTTPAddr, cfg.NatsAddr = "127.0.0.1:0", "127.0.0.1:0"
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := app.Start(ctx, cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatalf("start jetgate: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = s.Shutdown(ctx)
	})
	return s
}

// newClient returns a client of s over kind ("http" or "nats"); ccfg
// holds the backpressure settings. Over NATS, a jetgate without the NATS
// binding skips the test.
func newClient(t testing.TB, s *app.Server, kind string, ccfg client.Config) *env {
	t.Helper()
	e := &env{srv: s, kind: kind}
	switch kind {
	case "http":
		e.rt = &countingRT{next: &http.Transport{MaxIdleConnsPerHost: 64}}
		ccfg.URL, ccfg.HTTPClient = s.URL(), &http.Client{Transport: e.rt}
		t.Cleanup(e.rt.next.(*http.Transport).CloseIdleConnections)
	case "nats":
		nc, err := nats.Connect(s.NatsURL(), s.NatsAuth()) // the embedded server's nkey when tokens are set
		if err != nil {
			t.Fatalf("connect NATS: %v", err)
		}
		t.Cleanup(nc.Close)
		ccfg.Conn = nc
	}
	c, err := client.New(ccfg)
	if err != nil {
		t.Fatal(err)
	}
	e.c = c
	if kind == "nats" {
		_, err := c.Get(context.Background(), "00000000-0000-7000-8000-000000000000")
		if IsNoResponders(err) {
			t.Skip("this jetgate serves no NATS binding yet (no responders on ojs.v1.jobs.get)")
		}
	}
	return e
}

// IsNoResponders reports the error of a NATS request nobody answered.
func IsNoResponders(err error) bool {
	e, ok := errors.AsType[*client.Error](err)
	return ok && e.Code == "unavailable" && e.Status == 503
}

// setup is a fresh jetgate with cfg and a client over kind.
func setup(t *testing.T, kind string, cfg app.Config, ccfg client.Config) *env {
	t.Helper()
	return newClient(t, startServer(t, cfg), kind, ccfg)
}

// bindings runs f over HTTP and over NATS.
func bindings(t *testing.T, f func(t *testing.T, kind string)) {
	for _, kind := range []string{"http", "nats"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			f(t, kind)
		})
	}
}

// countingRT counts HTTP answers by status and signals the first 429.
type countingRT struct {
	next     http.RoundTripper
	mu       sync.Mutex
	statuses map[int]int
	requests atomic.Int64
	first429 chan struct{}
	once     sync.Once
}

func (c *countingRT) RoundTrip(r *http.Request) (*http.Response, error) {
	c.requests.Add(1)
	res, err := c.next.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	if c.statuses == nil {
		c.statuses = map[int]int{}
	}
	c.statuses[res.StatusCode]++
	if res.StatusCode == 429 && c.first429 != nil {
		c.once.Do(func() { close(c.first429) })
	}
	c.mu.Unlock()
	return res, nil
}

func (c *countingRT) count(status int) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.statuses[status]
}

// eventually polls cond every 20 ms until it holds or within passes.
func eventually(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, within)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitState polls the job until it is in state and returns it.
func waitState(t testing.TB, c *client.Client, id, state string, within time.Duration) *client.Job {
	t.Helper()
	var j *client.Job
	eventually(t, within, "job "+id+" in state "+state, func() bool {
		var err error
		j, err = c.Get(context.Background(), id)
		if err != nil {
			t.Fatalf("get %s: %v", id, err)
		}
		return string(j.State) == state
	})
	return j
}

// enqueue enqueues a job with e's client; an error fails the test.
func enqueue(t testing.TB, ctx context.Context, e *env, typ string, args []any, opts ...client.Option) *client.Job {
	t.Helper()
	j, err := e.c.Enqueue(ctx, typ, args, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return j
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// lockedBuffer is an io.Writer safe for concurrent writes.
type lockedBuffer struct {
	mu sync.Mutex
	b  []byte
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.b = append(l.b, p...)
	return len(p), nil
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return string(l.b)
}
