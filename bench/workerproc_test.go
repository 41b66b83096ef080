package bench

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

// TestWorkerRunsApart: a drain's worker runs as another process of this
// executable, and its failure comes back with what it wrote to stderr.
func TestWorkerRunsApart(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := workerSpec{Kind: "no-such-worker"}.runApart(ctx)
	if err == nil || !strings.Contains(err.Error(), "exit status 1") || !strings.Contains(err.Error(), `unknown drain worker "no-such-worker"`) {
		t.Fatalf("got %v, want the worker process's exit status and its error", err)
	}
}

// TestWorkerStopsWithoutBench: a worker process whose bench process is
// gone (its stdin closed) stops draining and fails, instead of polling an
// empty queue for ever.
func TestWorkerStopsWithoutBench(t *testing.T) {
	e := startEnv(t)
	spec := `{"kind":"sdk-http","url":"` + e.httpURL + `","queue":"bench-orphan-worker","worker_id":"w","jobs":5,"handlers":2}`
	var out, errOut bytes.Buffer
	done := make(chan int, 1)
	go func() { done <- workerProcess(spec, strings.NewReader(""), &out, &errOut) }()
	select {
	case code := <-done:
		if code != 1 || !strings.Contains(errOut.String(), "the bench process is gone") || out.Len() != 0 {
			t.Fatalf("exit %d, stdout %q, stderr %q", code, out.String(), errOut.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the worker kept draining after its stdin closed")
	}
}
