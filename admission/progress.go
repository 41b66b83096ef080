package admission

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetgate/jetgate/admission/ojs"
	"github.com/jetgate/jetgate/jetstream/jobstore"
	"github.com/jetgate/jetgate/jetstream/topology"
)

// Progress (ojs-progress.md) is kept on the job record: the update is one
// compare-and-swap that keeps the record's token (the job stays in its
// attempt), followed by the heartbeat it implies (PRG-008). Updates for a
// job that is not active are ignored, not refused (PRG-007).

// progressEventEvery is the least time between two job.progress events of
// one job (ojs-progress.md 6.2); every update is stored.
const progressEventEvery = time.Second

// errNotActive marks a progress update for a job that is not active.
var errNotActive = errors.New("job not active")

// ReportProgress records a worker's progress update of active job id and
// resets its heartbeat clock. applied is false when the job is not active
// (the update is ignored, PRG-007).
func (s *Service) ReportProgress(ctx context.Context, id string, u *ojs.ProgressUpdate) (st *ojs.ProgressStatus, applied bool, err error) {
	now := s.now()
	nj, old, err := s.transition(ctx, id, func(j *ojs.Job) (*ojs.Job, func(context.Context, *ojs.Job) error, error) {
		if j.State != ojs.StateActive {
			return nil, nil, errNotActive
		}
		nj := j.Clone()
		if u.Progress != nil && (j.Progress == nil || *u.Progress >= *j.Progress) {
			p := *u.Progress // PRG-003: never backwards within an attempt
			nj.Progress = &p
		}
		if u.Data != nil {
			nj.ProgressData = u.Data
		}
		if u.Message != nil {
			nj.ProgressMessage = *u.Message
		}
		if u.Checkpoint != nil {
			nj.LastCheckpoint = u.Checkpoint
		}
		// The record budget's part for progress (issue 31).
		if err := s.sizes.CheckProgress(nj); err != nil {
			return nil, nil, err
		}
		nj.ProgressUpdatedAt = ojs.NewTime(now)
		return nj, nil, nil
	})
	switch {
	case errors.Is(err, errNotActive):
		return ojs.ProgressOf(old), false, nil
	case err != nil:
		return nil, false, err
	}
	s.met.ProgressUpdated(ctx, nj.Queue, nj.Type, len(u.Checkpoint))
	if _, _, err := s.heartbeatJob(ctx, nj, 0); err != nil {
		s.log.Warn("progress stored but heartbeat deadline not moved", "job", id, "error", err)
	}
	if old.ProgressUpdatedAt == nil || now.Sub(old.ProgressUpdatedAt.Time) >= progressEventEvery {
		extra := map[string]any{"job_id": nj.ID, "worker_id": nj.WorkerID, "attempt": nj.Attempt}
		if nj.Progress != nil {
			extra["progress"] = *nj.Progress
			extra["progress_percent"] = *nj.Progress * 100
		}
		if len(nj.ProgressData) > 0 {
			extra["data"] = json.RawMessage(nj.ProgressData)
		}
		if nj.ProgressMessage != "" {
			extra["message"] = nj.ProgressMessage
		}
		s.events.PublishJob(EventJobProgress, nj, extra)
	}
	return ojs.ProgressOf(nj), true, nil
}

// Progress returns the progress of job id (PRG-004).
func (s *Service) Progress(ctx context.Context, id string) (*ojs.ProgressStatus, error) {
	j, _, err := s.store.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	return ojs.ProgressOf(j), nil
}

// WatchJob streams job id's record as it changes, starting with its
// current value, until ctx ends or the record is removed; the channel is
// closed then. It reads the job bucket's own change feed (a KV watch), so
// it sees changes made by any jetgate process.
func (s *Service) WatchJob(ctx context.Context, id string) (<-chan *ojs.Job, error) {
	if _, _, err := s.store.Get(ctx, id); err != nil {
		return nil, err
	}
	w, err := s.assets.Jobs.Watch(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("watch job %s: %w", id, jobstore.Unavailable(err))
	}
	ch := make(chan *ojs.Job)
	go func() {
		defer close(ch)
		defer func() { _ = w.Stop() }()
		for {
			select {
			case <-ctx.Done():
				return
			case e, ok := <-w.Updates():
				if !ok {
					return
				}
				if e == nil {
					continue // the end of the initial values
				}
				if e.Operation() != jetstream.KeyValuePut {
					return
				}
				var j ojs.Job
				if err := json.Unmarshal(e.Value(), &j); err != nil {
					s.log.Warn("watch: undecodable job record", "job", id, "error", err)
					continue
				}
				select {
				case ch <- &j:
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	return ch, nil
}

// heartbeatJob moves active job j's lease timer to its next deadline
// counted from now, with heartbeat timeout vis (0: the attempt's), and
// reports whether it did and whether the job's execution timeout passed
// (the worker should cancel). Past the end of the grace period it writes
// nothing: the timer standing there ends the attempt.
func (s *Service) heartbeatJob(ctx context.Context, j *ojs.Job, vis time.Duration) (extended, cancel bool, err error) {
	c := s.attemptOf(j)
	if vis <= 0 {
		vis = c.beat
	}
	now := s.now()
	if !now.Before(c.hard) {
		return false, true, nil
	}
	at, kind := c.next(now, vis, now)
	if err := s.store.SetTimer(ctx, topology.TimerLease, j.ID, j.Internal.Token, at, leaseHeaders(kind, now, vis)...); err != nil {
		return false, false, err
	}
	s.beats.beat(j.ID, j.Queue, vis, now)
	return true, c.cancelRequested(now), nil
}
