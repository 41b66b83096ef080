package jetgatetest

import (
	"context"
	"testing"
	"time"

	"github.com/jetgate/jetgate/admission/ojs"
)

// pollEvery is how often WaitJobState looks at the job again.
const pollEvery = 5 * time.Millisecond

// WaitJobState waits until job id is in state (such as "completed") and
// returns it; it fails the test if the job is not there within the
// deadline, naming the state it was last seen in.
func (s *Server) WaitJobState(t testing.TB, id string, state ojs.State, within time.Duration) *ojs.Job {
	t.Helper()
	deadline := time.Now().Add(within)
	var last string
	for {
		ctx, cancel := context.WithTimeout(context.Background(), within)
		job, err := s.App.Service().Get(ctx, id)
		cancel()
		switch {
		case err == nil && job.State == state:
			return job
		case err == nil:
			last = string(job.State)
		default:
			last = "error: " + err.Error()
		}
		if time.Now().After(deadline) {
			t.Fatalf("jetgatetest: job %s not %s within %s (last seen: %s)", id, state, within, last)
		}
		time.Sleep(pollEvery)
	}
}

// Handler works one job of DrainQueue: nil acks it; an error fails it
// (nack), with the error's message, so it retries or is discarded as its
// retry policy says.
type Handler func(ctx context.Context, job *ojs.Job) error

// DrainQueue fetches the available jobs of queue and hands each to h,
// acking or failing it, until a fetch finds none; it returns how many
// jobs it handled. Jobs that are scheduled, retrying or held by a rate
// limit are not waited for. A nil h acks every job.
func (s *Server) DrainQueue(t testing.TB, queue string, h Handler) int {
	t.Helper()
	ctx := context.Background()
	svc := s.App.Service()
	n := 0
	for {
		jobs, err := svc.Fetch(ctx, ojs.FetchRequest{Queues: []string{queue}, Count: 100, WorkerID: "jetgatetest"})
		if err != nil {
			t.Fatalf("jetgatetest: fetch %s: %v", queue, err)
		}
		if len(jobs) == 0 {
			return n
		}
		for _, job := range jobs {
			s.finish(t, ctx, job, h)
			n++
		}
	}
}

func (s *Server) finish(t testing.TB, ctx context.Context, job *ojs.Job, h Handler) {
	t.Helper()
	var herr error
	if h != nil {
		herr = h(ctx, job)
	}
	svc := s.App.Service()
	if herr == nil {
		_, err := svc.Ack(ctx, ojs.AckRequest{JobID: job.ID, WorkerID: "jetgatetest", Attempt: job.Attempt})
		if err != nil {
			t.Fatalf("jetgatetest: ack %s: %v", job.ID, err)
		}
		return
	}
	jerr := ojs.JobError{Type: "handler_error", Message: herr.Error()}
	if _, err := svc.Nack(ctx, ojs.NackRequest{JobID: job.ID, WorkerID: "jetgatetest", Attempt: job.Attempt, Error: jerr}); err != nil {
		t.Fatalf("jetgatetest: nack %s: %v", job.ID, err)
	}
}
