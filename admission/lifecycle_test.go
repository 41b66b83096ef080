package admission_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/jetgate/jetgate/admission"
	"github.com/jetgate/jetgate/admission/ojs"
	"github.com/jetgate/jetgate/jetstream/natstest"
)

// recordingHook is a Lifecycle that records what admission tells it and
// answers the jobs of type "known" with a fixed existing job.
type recordingHook struct {
	mu      sync.Mutex
	admits  int
	dones   []error
	changes []string
	known   *ojs.Job
}

var errRefused = errors.New("refused by hook")

func (h *recordingHook) Admit(_ context.Context, _ admission.Jobs, batch []*ojs.Job) (admission.Admission, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.admits++
	var a admission.Admission
	for i, j := range batch {
		if j.ID == "" || j.CreatedAt == nil || j.State == "" {
			panic("Admit before the job got its id, created_at and state")
		}
		switch j.Type {
		case "refused":
			return a, errRefused
		case "known":
			if a.Existing == nil {
				a.Existing = make([]*ojs.Job, len(batch))
			}
			a.Existing[i] = h.known
		}
	}
	a.Done = func(_ context.Context, err error) {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.dones = append(h.dones, err)
	}
	return a, nil
}

func (h *recordingHook) JobChanged(_ context.Context, j *ojs.Job, from ojs.State) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.changes = append(h.changes, string(from)+">"+string(j.State))
}

// The Lifecycle contract (admission/lifecycle.go): Admit sees every
// enqueue before anything is stored and can refuse it or answer a job
// with an existing one; Done learns the outcome; JobChanged sees stored
// state changes with the state they came from.
func TestLifecycleHooks(t *testing.T) {
	t.Parallel()
	h := &recordingHook{known: &ojs.Job{ID: ojs.NewID(), Type: "known", State: ojs.StateAvailable}}
	s := natstest.RunServer(t)
	_, js := natstest.Connect(t, s)
	b := setupCfg(t, js, admission.Config{Hooks: []admission.Lifecycle{h}})
	ctx := testCtx(t)

	if _, err := b.svc.Enqueue(ctx, &ojs.Job{Type: "refused", Queue: "default", Args: []byte("[]")}); !errors.Is(err, errRefused) {
		t.Fatalf("refused enqueue: %v", err)
	}
	_, err := b.svc.Enqueue(ctx, &ojs.Job{Type: "known", Queue: "default", Args: []byte("[]")})
	var dd *ojs.DeduplicatedError
	if !errors.As(err, &dd) || dd.Job.ID != h.known.ID {
		t.Fatalf("answered enqueue: %v", err)
	}
	j, err := b.svc.Enqueue(ctx, &ojs.Job{Type: "new", Queue: "default", Args: []byte("[]")})
	if err != nil {
		t.Fatal(err)
	}
	out, err := b.svc.EnqueueBatch(ctx, []*ojs.Job{
		{Type: "new", Queue: "default", Args: []byte("[]")},
		{Type: "known", Queue: "default", Args: []byte("[]")},
	})
	if err != nil || out[1].ID != h.known.ID || out[0].ID == h.known.ID {
		t.Fatalf("batch: %v %v", out, err)
	}
	if _, err := b.svc.Get(ctx, out[0].ID); err != nil {
		t.Fatalf("batch job not created: %v", err)
	}
	if _, err := b.svc.Get(ctx, h.known.ID); !errors.Is(err, ojs.ErrNotFound) {
		t.Fatalf("an answered job was created: %v", err)
	}
	if _, _, err := b.svc.Cancel(ctx, j.ID); err != nil {
		t.Fatal(err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.admits != 4 {
		t.Errorf("%d admits, want 4 (one per enqueue call)", h.admits)
	}
	if len(h.dones) != 3 || slices.ContainsFunc(h.dones, func(e error) bool { return e != nil }) {
		t.Errorf("dones %v, want three nil outcomes", h.dones)
	}
	if !slices.Equal(h.changes, []string{"available>cancelled"}) {
		t.Errorf("changes %v, want [available>cancelled]", h.changes)
	}
}
