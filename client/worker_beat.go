package client

import (
	"context"
	"os"
	"time"
)

// heartbeatLoop beats every HeartbeatInterval until the worker stops.
func (w *Worker) heartbeatLoop() {
	defer w.loops.Done()
	t := time.NewTicker(w.cfg.HeartbeatInterval)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			w.beat(w.ctx)
		case <-w.ctx.Done():
			return
		}
	}
}

// beat sends one heartbeat and applies its answer: the directed state,
// the jobs to cancel at their execution timeout, and the jobs the server
// no longer holds for this worker (not extended twice in a row: the
// first miss may be a job whose claim is still being written).
func (w *Worker) beat(ctx context.Context) {
	ids := w.Active()
	hn, _ := os.Hostname()
	res, err := w.c.Heartbeat(ctx, HeartbeatRequest{WorkerID: w.cfg.WorkerID, State: w.State(), ActiveJobIDs: ids,
		Queues: w.cfg.Queues, Concurrency: w.cfg.Concurrency, Hostname: hn, PID: os.Getpid()})
	if err != nil {
		if ctx.Err() == nil {
			w.log.Warn("heartbeat failed", "error", err) // 4.6: keep the state, beat again
		}
		return
	}
	switch res.State {
	case StateQuiet:
		w.setState(StateQuiet)
	case StateTerminate:
		w.setState(StateTerminate)
		w.termOnce.Do(func() { close(w.terminate) })
	}
	extended := make(map[string]bool, len(res.Extended))
	for _, id := range res.Extended {
		extended[id] = true
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, id := range res.Cancel {
		if t := w.active[id]; t != nil {
			t.cancel(ErrExecutionTimeout)
		}
	}
	for _, id := range ids {
		t := w.active[id]
		if t == nil {
			continue
		}
		if extended[id] {
			t.misses = 0
			continue
		}
		if t.misses++; t.misses >= 2 {
			t.cancel(ErrJobCancelled)
		}
	}
}

// lastHeartbeat tells the server the worker terminated with no job.
func (w *Worker) lastHeartbeat() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, _ = w.c.Heartbeat(ctx, HeartbeatRequest{WorkerID: w.cfg.WorkerID, State: StateTerminate,
		ActiveJobIDs: w.Active(), Queues: w.cfg.Queues, Concurrency: w.cfg.Concurrency})
}
