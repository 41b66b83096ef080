package client

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"time"
)

// ctxKey carries the job and worker in a handler's context.
type ctxKey struct{}

type jobCtx struct {
	job *Job
	w   *Worker
}

// JobFromContext returns the job a handler's context runs.
func JobFromContext(ctx context.Context) (*Job, bool) {
	jc, ok := ctx.Value(ctxKey{}).(*jobCtx)
	if !ok {
		return nil, false
	}
	return jc.job, true
}

// ReportProgress reports the progress of the job a handler's context runs
// (ojs-progress.md): fraction done in [0, 1] and a message. It also keeps
// the job from stalling, as a heartbeat does.
func ReportProgress(ctx context.Context, fraction float64, message string) error {
	return ReportProgressUpdate(ctx, ProgressUpdate{Progress: &fraction, Message: message})
}

// ReportProgressUpdate reports a full progress update (data, checkpoint)
// of the job a handler's context runs.
func ReportProgressUpdate(ctx context.Context, u ProgressUpdate) error {
	jc, ok := ctx.Value(ctxKey{}).(*jobCtx)
	if !ok {
		return errors.New("client: ReportProgress outside a worker's handler")
	}
	return jc.w.c.Progress(ctx, jc.job.ID, u)
}

// start runs job j on a slot taken for it.
func (w *Worker) start(j *Job) {
	base := jobTrace(context.WithValue(context.Background(), ctxKey{}, &jobCtx{job: j, w: w}), j)
	ctx, cancel := context.WithCancelCause(base)
	t := &task{job: j, cancel: cancel}
	w.mu.Lock()
	w.active[j.ID] = t
	w.mu.Unlock()
	w.running.Add(1)
	go w.run(ctx, t)
}

// run runs one job's handler and reports its outcome.
func (w *Worker) run(ctx context.Context, t *task) {
	j := t.job
	defer func() {
		t.cancel(nil)
		w.mu.Lock()
		delete(w.active, j.ID)
		w.mu.Unlock()
		w.slots <- struct{}{}
		w.running.Done()
	}()
	exec := j.ExecutionTimeout(0)
	if exec > 0 {
		// ojs-timeouts.md 7.2: cancel at the timeout, give up at the end
		// of the grace period.
		grace := j.GraceOr(w.cfg.DefaultGracePeriod)
		soft := time.AfterFunc(exec, func() { t.cancel(ErrExecutionTimeout) })
		hard := time.AfterFunc(exec+grace, func() { w.abandon(t, exec, grace) })
		defer soft.Stop()
		defer hard.Stop()
	}
	result, err := w.call(ctx, j)
	if t.reported.Swap(true) {
		return // reported by the drain or at the end of the grace period
	}
	cause := context.Cause(ctx)
	switch {
	case err == nil && !errors.Is(cause, ErrJobCancelled):
		w.send(report{job: j, ack: &Ack{JobID: j.ID, Attempt: j.Attempt, WorkerID: w.cfg.WorkerID, Result: result}})
	case errors.Is(cause, ErrJobCancelled):
		// The server holds the job no more: nothing to report.
	default:
		w.send(report{job: j, nack: &Nack{JobID: j.ID, Attempt: j.Attempt, WorkerID: w.cfg.WorkerID, Error: jobError(err, cause)}})
	}
}

// call runs the handler, turning a panic into an error.
func (w *Worker) call(ctx context.Context, j *Job) (result any, err error) {
	w.mu.Lock()
	h := w.handlers[j.Type]
	w.mu.Unlock()
	if h == nil {
		return nil, &JobError{Type: "handler_not_found", Code: "handler_not_found", Retryable: ptr(true),
			Message: fmt.Sprintf("worker %s has no handler for job type %q", w.cfg.WorkerID, j.Type)}
	}
	defer func() {
		if p := recover(); p != nil {
			err = &JobError{Type: "panic", Code: "panic", Retryable: ptr(true), Message: fmt.Sprint(p),
				Details: map[string]string{"stack": string(debug.Stack())}}
		}
	}()
	return h(ctx, j)
}

// jobError is the error a failed handler reports.
func jobError(err error, cause error) JobError {
	if je, ok := errors.AsType[*JobError](err); ok {
		return *je
	}
	if errors.Is(cause, ErrShutdown) {
		return JobError{Type: "shutdown", Code: "shutdown", Retryable: ptr(true), Message: err.Error()}
	}
	if errors.Is(cause, ErrExecutionTimeout) {
		return JobError{Type: "timeout", Code: "timeout", Retryable: ptr(true), Message: err.Error()}
	}
	return JobError{Type: "handler_error", Code: "handler_error", Retryable: ptr(true), Message: err.Error()}
}

// abandon fails a job whose handler did not return within its grace
// period after the execution timeout (ojs-timeouts.md 7.2 step 4); the
// handler keeps its slot until it returns.
func (w *Worker) abandon(t *task, exec, grace time.Duration) {
	if t.reported.Swap(true) {
		return
	}
	w.log.Warn("handler ignored its execution timeout; job failed", "job", t.job.ID, "timeout", exec, "grace", grace)
	w.send(report{job: t.job, nack: &Nack{JobID: t.job.ID, Attempt: t.job.Attempt, WorkerID: w.cfg.WorkerID,
		Error: JobError{Type: "timeout", Code: "timeout", Retryable: ptr(true),
			Message: fmt.Sprintf("handler did not return within its timeout of %s and grace period of %s", exec, grace)}}})
}
