package jetgatetest_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"runtime"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"go.uber.org/goleak"

	"github.com/jetgate/jetgate/admission/ojs"
	"github.com/jetgate/jetgate/client"
	"github.com/jetgate/jetgate/client/jetgatetest"
)

// The kit leaves nothing behind once a test ends (issue 19: "cleaned up
// by t.Cleanup").
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// Issue 19 test kit: Start runs NATS with JetStream and jetgate on free
// ports; the handle's connection, JetStream context and HTTP API work;
// the time to ready is logged (see also BenchmarkStart).
func TestStartServesNATSAndHTTP(t *testing.T) {
	t.Parallel()
	begin := time.Now()
	jg := jetgatetest.Start(t)
	t.Logf("jetgatetest.Start ready in %s", time.Since(begin))

	if !jg.Conn.IsConnected() || jg.Conn.ConnectedUrl() != jg.NatsURL {
		t.Fatalf("conn %s connected=%v, want %s", jg.Conn.ConnectedUrl(), jg.Conn.IsConnected(), jg.NatsURL)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := jg.JetStream.Stream(ctx, "OJS_READY"); err != nil {
		t.Fatalf("jetgate's ready stream: %v", err)
	}
	res, err := http.Get(jg.HTTPURL + "/ojs/v1/health")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 200 {
		t.Fatalf("health: %d", res.StatusCode)
	}
}

// Two kits in one process are independent: different ports, different
// stores (tests using the kit can run in parallel).
func TestStartTwiceIsIsolated(t *testing.T) {
	t.Parallel()
	a, b := jetgatetest.Start(t), jetgatetest.Start(t)
	if a.NatsURL == b.NatsURL || a.HTTPURL == b.HTTPURL {
		t.Fatalf("shared endpoints: %s %s / %s %s", a.NatsURL, a.HTTPURL, b.NatsURL, b.HTTPURL)
	}
	enqueue(t, a, "only-a")
	if n := b.DrainQueue(t, "only-a", nil); n != 0 {
		t.Fatalf("b saw %d jobs of a", n)
	}
}

// Issue 19 helpers: DrainQueue hands every available job to the handler,
// acks a nil result and fails an error; WaitJobState sees the outcomes.
func TestDrainQueueAndWaitJobState(t *testing.T) {
	t.Parallel()
	jg := jetgatetest.Start(t)
	ok := enqueue(t, jg, "mail")
	bad := enqueue(t, jg, "mail", func(j *ojs.Job) { j.MaxAttempts = 1 })
	seen := map[string]bool{}
	n := jg.DrainQueue(t, "mail", func(_ context.Context, j *ojs.Job) error {
		seen[j.ID] = true
		if j.ID == bad {
			return errors.New("smtp down")
		}
		return nil
	})
	if n != 2 || !seen[ok] || !seen[bad] {
		t.Fatalf("drained %d, saw %v", n, seen)
	}
	if j := jg.WaitJobState(t, ok, ojs.StateCompleted, 10*time.Second); j.ID != ok {
		t.Fatalf("got %s", j.ID)
	}
	j := jg.WaitJobState(t, bad, ojs.StateDiscarded, 10*time.Second)
	if j.Error == nil || j.Error.Message != "smtp down" {
		t.Fatalf("discarded job's error: %+v", j.Error)
	}
	if n := jg.DrainQueue(t, "mail", nil); n != 0 {
		t.Fatalf("queue not empty after drain: %d more", n)
	}
}

// WaitJobState fails the test, naming the state it saw, when the job
// never gets there (a helper that cannot fail would hide bugs).
func TestWaitJobStateFailsOnDeadline(t *testing.T) {
	t.Parallel()
	jg := jetgatetest.Start(t)
	id := enqueue(t, jg, "idle")
	ft := &fakeT{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		jg.WaitJobState(ft, id, ojs.StateCompleted, 50*time.Millisecond)
	}()
	<-done
	if !ft.failed || ft.msg == "" {
		t.Fatalf("WaitJobState did not fail: %+v", ft)
	}
	t.Logf("failure message: %s", ft.msg)
}

// fakeT records a Fatalf and ends the goroutine, as testing.T does.
type fakeT struct {
	testing.TB
	failed bool
	msg    string
}

func (f *fakeT) Helper() {}
func (f *fakeT) Fatalf(format string, args ...any) {
	f.failed = true
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func enqueue(t *testing.T, jg *jetgatetest.Server, queue string, mods ...func(*ojs.Job)) string {
	t.Helper()
	j := &ojs.Job{Type: "test.job", Queue: queue, Args: []byte(`[]`)}
	for _, m := range mods {
		m(j)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	got, err := jg.App.Service().Enqueue(ctx, j)
	if err != nil {
		t.Fatalf("enqueue: %v", err)
	}
	return got.ID
}

// BenchmarkStart measures Start to ready: embedded NATS, JetStream assets,
// jetgate serving HTTP, and a client connection. The servers of one round
// are shut down when it ends (run with -benchtime=20x to keep few alive).
func BenchmarkStart(b *testing.B) {
	b.ReportAllocs()
	for range b.N {
		jetgatetest.Start(b)
	}
}

// Issue 19 test kit "with a connected client": the handle's clients enqueue
// and read jobs over HTTP and over NATS, and WithToken turns access
// control on with a token they send.
func TestClientsAndToken(t *testing.T) {
	t.Parallel()
	jg := jetgatetest.Start(t, jetgatetest.WithToken("s3cret"))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	j, err := jg.HTTPClient.Enqueue(ctx, "report.build", []any{1}, client.Queue("reports"))
	if err != nil {
		t.Fatalf("enqueue over HTTP with the token: %v", err)
	}
	if n := jg.DrainQueue(t, "reports", nil); n != 1 {
		t.Fatalf("drained %d, want 1", n)
	}
	jg.WaitJobState(t, j.ID, ojs.StateCompleted, 10*time.Second)

	anon, err := client.New(client.Config{URL: jg.HTTPURL})
	if err != nil {
		t.Fatal(err)
	}
	defer anon.Close()
	if _, err := anon.Get(ctx, j.ID); !client.IsStatus(err, 401) {
		t.Fatalf("get without a token: %v, want 401", err)
	}

	got, err := jg.Client.Get(ctx, j.ID)
	if err != nil || got.State != ojs.StateCompleted {
		t.Fatalf("get over NATS: %+v %v", got, err)
	}

	// Issue 31 item 8: the embedded server is not open either. A NATS
	// client without the kit's credentials is refused; with NatsAuth (the
	// nkey seed of NatsSeedFile) it connects.
	if nc, err := nats.Connect(jg.NatsURL, nats.MaxReconnects(0)); err == nil {
		nc.Close()
		t.Fatal("a NATS client without credentials connected")
	}
	if jg.NatsSeedFile == "" {
		t.Fatal("no seed file with access control on")
	}
	nc, err := nats.Connect(jg.NatsURL, jg.NatsAuth)
	if err != nil {
		t.Fatalf("connect with NatsAuth: %v", err)
	}
	nc.Close()
}
