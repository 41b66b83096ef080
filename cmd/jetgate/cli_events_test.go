package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jetgate/jetgate/admission/ojs"
	"github.com/jetgate/jetgate/client/jetgatetest"
)

// syncBuffer is a bytes.Buffer safe for a command writing while the test reads.
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

// startTail runs "jetgate events tail args..." in the background and
// returns once it has subscribed; wait returns its stdout and error.
func startTail(t *testing.T, args ...string) (wait func() (string, error)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	var out, errOut syncBuffer
	done := make(chan error, 1)
	go func() { done <- run(ctx, append([]string{"events", "tail"}, args...), &out, &errOut) }()
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(errOut.String(), "listening on") {
		select {
		case err := <-done:
			cancel()
			t.Fatalf("events tail ended before subscribing: %v: %s", err, errOut.String())
		default:
		}
		if time.Now().After(deadline) {
			cancel()
			t.Fatalf("events tail did not subscribe: %s", errOut.String())
		}
		time.Sleep(2 * time.Millisecond)
	}
	return func() (string, error) {
		defer cancel()
		err := <-done
		return out.String(), err
	}
}

// Issue 19 CLI: "jetgate events tail" prints the live events with the
// --type and --queue filters (ojs-events.md 6.1 type patterns): only
// job.enqueued events of queue "mail" arrive, as a table and, with
// --json, as one CloudEvents object per line.
func TestEventsTailFilters(t *testing.T) {
	t.Parallel()
	jg := jetgatetest.Start(t)
	url := jg.NatsURL
	waitTable := startTail(t, "--nats-url", url, "--type", "job.enqueued", "--queue", "mail", "--count", "2")
	waitJSON := startTail(t, "--nats-url", url, "--type", "job.*", "--queue", "mail", "--count", "2", "--json")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ids := []string{}
	for _, q := range []string{"other", "mail", "other", "mail"} {
		j, err := jg.App.Service().Enqueue(ctx, &ojs.Job{Type: "email.send", Queue: q, Args: []byte(`[]`)})
		if err != nil {
			t.Fatal(err)
		}
		if q == "mail" {
			ids = append(ids, j.ID)
		}
	}
	out, err := waitTable()
	if err != nil {
		t.Fatalf("tail: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "TIME") {
		t.Fatalf("want a header and 2 events:\n%s", out)
	}
	want := map[string]bool{ids[0]: true, ids[1]: true} // events are not ordered across jobs
	for i, l := range lines[1:] {
		f := strings.Fields(l)
		if len(f) != 5 || f[1] != "job.enqueued" || f[2] != "mail" || f[3] != "email.send" || !want[f[4]] {
			t.Errorf("event line %d = %q, want job.enqueued mail email.send and one of %v", i, l, ids)
		}
		delete(want, f[len(f)-1])
	}

	out, err = waitJSON()
	if err != nil {
		t.Fatalf("tail --json: %v", err)
	}
	lines = strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 {
		t.Fatalf("want 2 JSON lines:\n%s", out)
	}
	for i, l := range lines {
		var ev ojs.Event
		if err := json.Unmarshal([]byte(l), &ev); err != nil {
			t.Fatalf("line %d not an event: %v: %s", i, err, l)
		}
		if ev.Type != "job.enqueued" || (ev.Subject != ids[0] && ev.Subject != ids[1]) || ev.SpecVersion == "" {
			t.Errorf("event %d: %+v", i, ev)
		}
	}
}

// Cancelling the context (Ctrl-C) ends a tail cleanly, exit 0; a NATS
// that cannot be reached is an error naming the URL.
func TestEventsTailStopsAndFailsToConnect(t *testing.T) {
	t.Parallel()
	jg := jetgatetest.Start(t)
	ctx, cancel := context.WithCancel(context.Background())
	var out, errOut syncBuffer
	done := make(chan error, 1)
	go func() { done <- run(ctx, []string{"events", "tail", "--nats-url", jg.NatsURL}, &out, &errOut) }()
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("tail after cancel: %v", err)
	}
	_, _, err := runCmd(t, "events", "tail", "--nats-url", "nats://127.0.0.1:1", "--timeout", "200ms")
	if err == nil || !strings.Contains(err.Error(), "nats://127.0.0.1:1") {
		t.Fatalf("err = %v, want a connect error naming the URL", err)
	}
}
