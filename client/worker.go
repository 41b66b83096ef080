package client

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
)

// Handler runs one job. Its ctx is cancelled at the job's execution
// timeout, when the server no longer holds the job for this worker, and
// at the end of a drain; context.Cause(ctx) tells which
// (ErrExecutionTimeout, ErrJobCancelled, ErrShutdown). A nil error acks
// the job with result (any JSON value, nil for none); an error fails the
// attempt: a *JobError (Fail, RateLimitedUntil) chooses its type, any
// other error is reported with type "handler_error", retryable.
type Handler func(ctx context.Context, job *Job) (result any, err error)

// WorkerConfig configures a Worker. Zero fields take the defaults of the
// worker protocol (ojs-worker-protocol.md, appendix A).
type WorkerConfig struct {
	// Queues are fetched from, first listed first (default ["default"]).
	Queues []string
	// Concurrency is the most jobs run at once (default 10).
	Concurrency int
	// WorkerID identifies this worker (default: a new UUID).
	WorkerID string
	// PollInterval is the pause after a fetch that found nothing, over
	// HTTP, and after a failed fetch (default 1 s).
	PollInterval time.Duration
	// FetchWait is how long, over NATS, an idle worker's fetch waits at
	// the server for a job (wait_ms; default 2 s). Stop waits for a fetch
	// under way, so this also bounds how long an idle worker takes to stop.
	FetchWait time.Duration
	// HeartbeatInterval is the time between heartbeats (default 5 s).
	HeartbeatInterval time.Duration
	// DrainTimeout is how long a drain waits for active jobs before
	// failing them with error type "shutdown" (default 25 s).
	DrainTimeout time.Duration
	// DefaultGracePeriod is the grace period of a job that has an
	// execution timeout but states no grace period (default 30 s, the
	// server's default).
	DefaultGracePeriod time.Duration
	// VisibilityTimeout, when > 0, is sent with each fetch and heartbeat.
	VisibilityTimeout time.Duration
	// MaxAckBatch bounds the acks (and nacks) of one ackbatch request
	// over NATS (default 500, at most 1000).
	MaxAckBatch int
	// OnReported, when set, is called after the server answered the ack
	// or nack of a job (err: the request's or the item's error).
	OnReported func(job *Job, acked bool, err error)
	// Logger receives the worker's warnings (default: the client's).
	Logger *slog.Logger
}

// Worker states (ojs-worker-protocol.md 2.1).
const (
	StateRunning   = "running"
	StateQuiet     = "quiet"
	StateTerminate = "terminate"
)

// Worker fetches jobs and runs their handlers.
type Worker struct {
	c        *Client
	cfg      WorkerConfig
	log      *slog.Logger
	handlers map[string]Handler

	mu      sync.Mutex
	state   string
	active  map[string]*task
	started bool

	slots     chan struct{} // one token per free handler slot
	quit      chan struct{} // closed when fetching stops for good
	quitOnce  sync.Once
	terminate chan struct{} // closed by a server "terminate" directive
	termOnce  sync.Once
	reports   chan report   // acks and nacks for the batcher (NATS)
	repQuit   chan struct{} // closed when the batchers should flush and stop
	ctx       context.Context
	cancel    context.CancelFunc

	fetching sync.WaitGroup // the fetch loop
	loops    sync.WaitGroup // the heartbeat loop
	batchers sync.WaitGroup
	running  sync.WaitGroup // handlers
	stopOnce sync.Once
	stopErr  error
}

// task is one active job.
type task struct {
	job      *Job
	cancel   context.CancelCauseFunc
	misses   int         // heartbeats in a row that did not extend it
	reported atomic.Bool // its ack or nack went out (or is abandoned)
}

// report is an ack or nack waiting for the batcher.
type report struct {
	job  *Job
	ack  *Ack
	nack *Nack
}

// NewWorker returns a Worker of client c.
func (c *Client) NewWorker(cfg WorkerConfig) (*Worker, error) {
	if len(cfg.Queues) == 0 {
		cfg.Queues = []string{"default"}
	}
	cfg.Concurrency = cmp.Or(cfg.Concurrency, 10)
	if cfg.Concurrency < 1 {
		return nil, fmt.Errorf("client: worker concurrency %d must be at least 1", cfg.Concurrency)
	}
	cfg.WorkerID = cmp.Or(cfg.WorkerID, "worker-"+uuid.NewString())
	cfg.PollInterval = cmp.Or(cfg.PollInterval, time.Second)
	cfg.FetchWait = cmp.Or(cfg.FetchWait, 2*time.Second)
	cfg.HeartbeatInterval = cmp.Or(cfg.HeartbeatInterval, 5*time.Second)
	cfg.DrainTimeout = cmp.Or(cfg.DrainTimeout, 25*time.Second)
	cfg.DefaultGracePeriod = cmp.Or(cfg.DefaultGracePeriod, 30*time.Second)
	cfg.MaxAckBatch = min(cmp.Or(cfg.MaxAckBatch, 500), 1000)
	log := cmp.Or(cfg.Logger, c.log)
	ctx, cancel := context.WithCancel(context.Background())
	w := &Worker{
		c: c, cfg: cfg, log: log.With("worker", cfg.WorkerID), handlers: map[string]Handler{},
		state: StateRunning, active: map[string]*task{},
		slots: make(chan struct{}, cfg.Concurrency), quit: make(chan struct{}), terminate: make(chan struct{}),
		reports: make(chan report, 2*cfg.Concurrency), repQuit: make(chan struct{}), ctx: ctx, cancel: cancel,
	}
	for range cfg.Concurrency {
		w.slots <- struct{}{}
	}
	return w, nil
}

// ID is the worker's id.
func (w *Worker) ID() string { return w.cfg.WorkerID }

// Handle registers the handler of a job type; call it before Start.
func (w *Worker) Handle(jobType string, h Handler) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.handlers[jobType] = h
}

// Start starts fetching and running jobs until Stop (or a server
// directive, see Terminated).
func (w *Worker) Start() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.started {
		return errors.New("client: worker already started")
	}
	select {
	case <-w.quit:
		return ErrStopped
	default:
	}
	w.started = true
	w.fetching.Add(1)
	w.loops.Add(1)
	go w.fetchLoop()
	go w.heartbeatLoop()
	if w.c.t.nats() {
		for range 2 {
			w.batchers.Add(1)
			go w.batcher()
		}
	}
	return nil
}

// Run starts the worker and drains it when ctx ends, on SIGTERM or
// SIGINT, or when the server directs it to terminate; the drain takes up
// to DrainTimeout. SIGTSTP quiets the worker (no more fetches, active
// jobs go on) and SIGCONT resumes it (ojs-worker-protocol.md 9).
func (w *Worker) Run(ctx context.Context) error {
	if err := w.Start(); err != nil {
		return err
	}
	sctx, stop := signal.NotifyContext(ctx, stopSignals...)
	defer stop()
	jobControl := make(chan os.Signal, 1)
	if len(jobControlSignals) > 0 {
		signal.Notify(jobControl, jobControlSignals...)
		defer signal.Stop(jobControl)
	}
wait:
	for {
		select {
		case <-sctx.Done():
			break wait
		case <-w.terminate:
			break wait
		case sig := <-jobControl:
			switch sig {
			case quietSignal:
				w.Quiet()
			case resumeSignal:
				w.Resume()
			}
		}
	}
	dctx, cancel := context.WithTimeout(context.Background(), w.cfg.DrainTimeout+10*time.Second)
	defer cancel()
	return w.Stop(dctx)
}

// Terminated is closed when the server directs the worker to terminate
// (a heartbeat answer, e.g. after an operator's POST
// /ojs/v1/admin/workers/{id}/terminate): the worker has stopped fetching,
// and a caller of Start should now call Stop (Run does).
func (w *Worker) Terminated() <-chan struct{} { return w.terminate }

// State is the worker's lifecycle state.
func (w *Worker) State() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.state
}

// Active returns the ids of the jobs running now.
func (w *Worker) Active() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	ids := make([]string, 0, len(w.active))
	for id := range w.active {
		ids = append(ids, id)
	}
	return ids
}

// Quiet stops fetching; active jobs go on (state quiet).
func (w *Worker) Quiet() { w.setState(StateQuiet) }

// Resume makes a quiet worker fetch again (state running); a worker that
// is terminating stays so (ojs-worker-protocol.md 9.4).
func (w *Worker) Resume() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.state == StateQuiet {
		w.state = StateRunning
	}
}

// setState moves the worker forward (running < quiet < terminate).
func (w *Worker) setState(s string) {
	rank := map[string]int{StateRunning: 0, StateQuiet: 1, StateTerminate: 2}
	w.mu.Lock()
	if r, ok := rank[s]; ok && r > rank[w.state] {
		w.state = s
	}
	terminate := w.state == StateTerminate
	w.mu.Unlock()
	if terminate {
		w.quitOnce.Do(func() { close(w.quit) })
	}
}

// Stop drains the worker (ojs-worker-protocol.md 7.2): it stops fetching,
// waits for active jobs up to DrainTimeout (or ctx's deadline, whichever
// comes first), then cancels the handlers still running with cause
// ErrShutdown and fails their jobs with error type "shutdown"; it sends
// the remaining acks, a last heartbeat, and returns once every goroutine
// of the worker has ended (a handler that ignores its context is waited
// for until ctx ends). Safe to call twice.
func (w *Worker) Stop(ctx context.Context) error {
	w.stopOnce.Do(func() { w.stopErr = w.stop(ctx) })
	return w.stopErr
}

func (w *Worker) stop(ctx context.Context) error {
	w.setState(StateTerminate)
	w.mu.Lock()
	started := w.started
	w.mu.Unlock()
	defer w.cancel()
	if !started {
		return nil
	}
	// The drain ends at DrainTimeout, or early enough before ctx's
	// deadline that cancelled handlers can still return and be reported.
	drain := w.cfg.DrainTimeout
	if dl, ok := ctx.Deadline(); ok {
		left := time.Until(dl)
		drain = min(drain, left-min(2*time.Second, left/5))
	}
	dctx, cancel := context.WithTimeout(ctx, drain)
	// A fetch under way finishes first: the jobs it claimed run and
	// drain like the others rather than being lost with its answer.
	if !waitGroup(dctx, &w.fetching) {
		w.cancel()
		w.fetching.Wait()
	}
	drained := waitGroup(dctx, &w.running)
	cancel()
	if !drained {
		w.failActive()
	}
	handlersDone := waitGroup(ctx, &w.running)
	close(w.repQuit)
	w.batchers.Wait()
	w.cancel() // ends the heartbeat loop's wait and any blocked request
	w.loops.Wait()
	w.lastHeartbeat()
	if !handlersDone {
		return fmt.Errorf("client: stop: handlers of jobs %v still running: %w", w.Active(), ctx.Err())
	}
	return nil
}

// failActive fails the jobs still running at the end of the drain with
// error type shutdown and cancels their handlers.
func (w *Worker) failActive() {
	w.mu.Lock()
	tasks := make([]*task, 0, len(w.active))
	for _, t := range w.active {
		tasks = append(tasks, t)
	}
	w.mu.Unlock()
	for _, t := range tasks {
		// Claim the report before cancelling: a handler that returns at
		// once on the cancel must not report its context error first.
		if t.reported.Swap(true) {
			t.cancel(ErrShutdown)
			continue
		}
		t.cancel(ErrShutdown)
		w.send(report{job: t.job, nack: &Nack{JobID: t.job.ID, Attempt: t.job.Attempt, WorkerID: w.cfg.WorkerID,
			Error: JobError{Type: "shutdown", Code: "shutdown", Retryable: ptr(true),
				Message: fmt.Sprintf("worker %s shutting down: the job did not finish within the drain timeout of %s",
					w.cfg.WorkerID, w.cfg.DrainTimeout)}}})
	}
}

// waitGroup waits for wg until ctx ends; it reports whether wg finished.
func waitGroup(ctx context.Context, wg *sync.WaitGroup) bool {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
		return true
	case <-ctx.Done():
		return false
	}
}

// fetchLoop claims jobs for the free slots while the worker runs.
func (w *Worker) fetchLoop() {
	defer w.fetching.Done()
	failures := 0
	idle := false // the last fetch found nothing
	for {
		select {
		case <-w.slots:
		case <-w.quit:
			return
		}
		k := 1
	grab:
		for k < w.cfg.Concurrency {
			select {
			case <-w.slots:
				k++
			default:
				break grab
			}
		}
		if w.State() != StateRunning {
			w.release(k)
			if !w.pause(w.cfg.PollInterval) {
				return
			}
			continue
		}
		req := FetchRequest{Queues: w.cfg.Queues, Count: k, WorkerID: w.cfg.WorkerID, VisibilityTimeout: w.cfg.VisibilityTimeout}
		if idle && w.c.t.nats() {
			// Long poll for one job: the server answers as soon as one
			// is claimed; the next fetch asks for the free slots at once.
			req.Count, req.Wait = 1, w.cfg.FetchWait
			w.release(k - 1)
			k = 1
		}
		jobs, err := w.c.Fetch(w.ctx, req)
		if err != nil {
			w.release(k)
			if w.ctx.Err() != nil {
				return
			}
			failures++
			d := min(w.cfg.PollInterval<<min(failures-1, 5), 30*time.Second)
			if e, ok := errors.AsType[*Error](err); ok {
				d = max(d, e.RetryAfter)
			}
			w.log.Warn("fetch failed", "error", err, "retry_in", d)
			if !w.pause(d) {
				return
			}
			continue
		}
		failures = 0
		w.release(k - len(jobs))
		for _, j := range jobs {
			w.start(j)
		}
		idle = len(jobs) == 0
		if idle && !w.c.t.nats() && !w.pause(w.cfg.PollInterval) {
			return
		}
	}
}

// release gives back n slots.
func (w *Worker) release(n int) {
	for range max(n, 0) {
		w.slots <- struct{}{}
	}
}

// pause waits d; false when the worker stops fetching meanwhile.
func (w *Worker) pause(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-w.quit:
		return false
	}
}
