package unique_test

import (
	"errors"
	"testing"
	"time"

	"github.com/jetgate/jetgate/admission/ojs"
	"github.com/jetgate/jetgate/admission/unique"
)

// expires_at and unique jobs (issue 18; ojs-core 5.2, ojs-unique-jobs.md
// 6): a unique job whose deadline passes before it starts is discarded by
// its expire timer with error "expired", and that frees its key: the next
// job of the key is accepted, not refused as a duplicate. A job that was
// nacked and is waiting to retry is discarded the same way when its
// expires_at passes: it is not retried after its deadline.
func TestExpiredUniqueJobFreesKeyAndIsNotRetried(t *testing.T) {
	t.Parallel()
	nodes := startNodes(t, 1, unique.Config{})
	n := nodes[0]
	ctx := testCtx(t)
	at := func(d time.Duration) string { return time.Now().Add(d).UTC().Format(time.RFC3339Nano) }

	// A unique job that expires while it waits (its queue is never fetched).
	first := mustEnqueue(t, n, `{"type":"u.exp","args":[1],"queue":"exq","expires_at":"`+at(500*time.Millisecond)+`",
		"unique":{"key":"k-exp","on_conflict":"reject"}}`)
	if _, err := enqueue(t, n, `{"type":"u.exp","args":[1],"queue":"exq","unique":{"key":"k-exp","on_conflict":"reject"}}`); !errors.Is(err, ojs.ErrDuplicate) {
		t.Fatalf("duplicate before expiry: %v, want ErrDuplicate", err)
	}
	waitState(t, n, first.ID, ojs.StateDiscarded, "expired", 20*time.Second)
	if _, err := enqueue(t, n, `{"type":"u.exp","args":[1],"queue":"exq","unique":{"key":"k-exp","on_conflict":"reject"}}`); err != nil {
		t.Fatalf("same key after the holder expired: %v, want accepted", err)
	}

	// A job nacked with a long backoff whose expires_at passes meanwhile.
	retry := mustEnqueue(t, n, `{"type":"u.exp","args":[2],"queue":"exr","expires_at":"`+at(1500*time.Millisecond)+`",
		"retry":{"max_attempts":5,"initial_interval":"PT10S","jitter":false}}`)
	got, err := n.svc.Fetch(ctx, ojs.FetchRequest{Queues: []string{"exr"}, WorkerID: "w"})
	if err != nil || len(got) != 1 || got[0].ID != retry.ID {
		t.Fatalf("fetch: %v %v", err, got)
	}
	res, err := n.svc.Nack(ctx, ojs.NackRequest{JobID: retry.ID, Error: ojs.JobError{Code: "boom", Message: "x"}})
	if err != nil || res.State != ojs.StateRetryable {
		t.Fatalf("nack: %v %+v", err, res)
	}
	waitState(t, n, retry.ID, ojs.StateDiscarded, "expired", 20*time.Second)
}

// waitState polls the job until it is in state with an error of code.
func waitState(t *testing.T, n node, id string, state ojs.State, code string, within time.Duration) {
	t.Helper()
	var j *ojs.Job
	for deadline := time.Now().Add(within); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		var err error
		if j, err = n.svc.Get(testCtx(t), id); err == nil && j.State == state && j.Error != nil && j.Error.Code == code {
			return
		}
	}
	t.Fatalf("job %s did not reach %s with error %q within %s: %+v", id, state, code, within, j)
}
