package admission

import (
	"context"
	"fmt"
	"strconv"

	"github.com/jetgate/jetgate/admission/ojs"
	"github.com/jetgate/jetgate/jetstream/jobstore"
	"github.com/jetgate/jetgate/jetstream/topology"
)

// Enqueue accepts a validated job (from ojs.ParseJob): it becomes pending,
// scheduled or available, and is stored before Enqueue returns.
func (s *Service) Enqueue(ctx context.Context, job *ojs.Job) (_ *ojs.Job, err error) {
	if err := s.queues.admit(ctx, job.Queue); err != nil {
		return nil, err
	}
	j := s.initial(job)
	// The record budget: a job that could not be stored with the room
	// its result, errors and progress may take is 413 before anything is
	// written (issue 31).
	if err := s.sizes.CheckJob(j, ""); err != nil {
		return nil, err
	}
	clientID := job.ID != "" && !job.ServerID
	if len(s.cfg.Hooks) > 0 {
		existing, admitted, aerr := s.admit(ctx, []*ojs.Job{j})
		if aerr != nil {
			return nil, aerr
		}
		if existing != nil && existing[0] != nil {
			admitted(nil)
			return nil, &ojs.DeduplicatedError{Job: existing[0]}
		}
		defer func() { admitted(err) }()
	}
	if s.seeds(j) {
		// The ready message is the job's only write (jobstore/seed.go).
		if err := s.armExpiry(ctx, j); err != nil {
			return nil, err
		}
		if err := s.store.PublishSeed(ctx, j, clientID); err != nil {
			return nil, err
		}
		j.Seed = true
		s.records.put(j, j.Rev)
		s.enqueued(ctx, j)
		return j, nil
	}
	if clientID && j.State != ojs.StateAvailable {
		if err := s.store.SeedTaken(ctx, []*ojs.Job{j}); err != nil {
			return nil, err
		}
	}
	done := s.beginCreate(j.ID)
	defer done()
	undo, err := s.reserveDepth(ctx, []*ojs.Job{j}, func() error { return s.publishInitial(ctx, j, clientID) })
	if err != nil {
		return nil, err
	}
	defer func() { undoDepth(undo, err) }()
	rev, err := s.store.Create(ctx, j)
	if err != nil {
		return nil, err
	}
	if clientID && j.State != ojs.StateAvailable {
		if err := s.store.CheckNoSeed(ctx, []*ojs.Job{j}); err != nil {
			return nil, err
		}
	}
	s.records.put(j, rev)
	s.enqueued(ctx, j)
	return j, nil
}

// seeds reports whether a new job is stored as its ready message alone,
// its record written when it leaves available (jobstore/seed.go): an
// available job of a queue without a depth bound. A bounded queue's job
// keeps its record from the start: the depth unit it holds is reserved
// while its ready message is published, and the message could not carry
// the unit's sequence.
func (s *Service) seeds(j *ojs.Job) bool {
	if j.State != ojs.StateAvailable {
		return false
	}
	cfg, _ := s.backpressureOf(j.Queue)
	return !cfg.Bounded()
}

// beginCreate marks a job's record as being created by this process, so a
// fetch that meets its ready message first waits for the record instead of
// putting the message back. The returned func ends the mark.
func (s *Service) beginCreate(id string) func() {
	ch := make(chan struct{})
	s.creating.Store(id, ch)
	return func() {
		s.creating.Delete(id)
		close(ch)
	}
}

// awaitCreate waits for this process's create of id, if one is under way.
func (s *Service) awaitCreate(ctx context.Context, id string) bool {
	v, ok := s.creating.Load(id)
	if !ok {
		return false
	}
	select {
	case <-v.(chan struct{}):
	case <-ctx.Done():
	}
	return true
}

// initial sets the server fields of a new job and picks its first state.
func (s *Service) initial(job *ojs.Job) *ojs.Job {
	j := job.Clone()
	now := s.now()
	j.SpecVersion = ojs.SpecVersion
	if j.ID == "" {
		j.ID = ojs.NewID()
	}
	if j.Retry == nil {
		p := ojs.DefaultRetryPolicy()
		j.Retry = &p
	}
	if j.MaxAttempts == 0 {
		j.MaxAttempts = j.Retry.MaxAttempts
	}
	j.Attempt = 0
	j.CreatedAt = ojs.NewTime(now)
	j.Internal = ojs.Internal{Token: jobstore.NewToken()}
	switch {
	case j.Pending:
		j.State = ojs.StatePending
	case j.ScheduledAt != nil && j.ScheduledAt.After(now):
		j.State = ojs.StateScheduled
	default:
		j.State = ojs.StateAvailable
		j.EnqueuedAt = ojs.NewTime(now)
	}
	return j
}

// publishInitial publishes what a new job's first state relies on: its
// ready message or due timer, and its expire timer if it has deadlines.
// The ready message of a job whose id a client named is checked against
// a job of that id stored as its ready message alone
// (jobstore.PublishReadyNamed).
func (s *Service) publishInitial(ctx context.Context, j *ojs.Job, named bool) error {
	if err := s.armExpiry(ctx, j); err != nil {
		return err
	}
	switch j.State {
	case ojs.StateAvailable:
		if named {
			return s.store.PublishReadyNamed(ctx, j)
		}
		return s.store.PublishReady(ctx, j)
	case ojs.StateScheduled:
		return s.store.SetTimer(ctx, topology.TimerDue, j.ID, j.Internal.Token, j.ScheduledAt.Time)
	}
	return nil
}

func (s *Service) enqueued(ctx context.Context, j *ojs.Job) {
	s.registerLimitKey(ctx, j) // limitkeys.go
	s.met.JobEnqueued(ctx, j.Queue, j.Type)
	s.stats.move(j.Queue, j.Priority, "", j.State)
	if j.State == ojs.StateAvailable {
		s.notify.ready(j.Queue)
	}
	if j.State == ojs.StateScheduled {
		s.events.PublishJob(EventJobScheduled, j, nil)
		return
	}
	s.events.PublishJob(EventJobEnqueued, j, nil)
}

// EnqueueBatch enqueues all jobs or none. A batch of available jobs of
// unbounded queues is stored as their ready messages alone, in one atomic
// batch (seedBatch). Any other batch keeps a record per job from the
// start: the ready messages and timers are published first, then every
// record is created in one atomic batch, and a failed batch leaves only
// messages whose tokens match no record; an id a client named must then
// not be held by a job stored as its ready message alone (SeedTaken,
// CheckNoSeed).
func (s *Service) EnqueueBatch(ctx context.Context, jobs []*ojs.Job) (_ []*ojs.Job, err error) {
	seen := make(map[string]int, len(jobs))
	clientIDs := map[string]bool{}
	out := make([]*ojs.Job, len(jobs))
	for i, job := range jobs {
		if err := s.queues.admit(ctx, job.Queue); err != nil {
			return nil, err
		}
		j := s.initial(job)
		if err := s.sizes.CheckJob(j, "jobs["+strconv.Itoa(i)+"]"); err != nil {
			return nil, err
		}
		if job.ID != "" && !job.ServerID {
			clientIDs[j.ID] = true
		}
		if k, dup := seen[j.ID]; dup {
			return nil, &ojs.ValidationError{Field: fmt.Sprintf("jobs[%d].id", i),
				Message: fmt.Sprintf("jobs[%d].id repeats the id of jobs[%d]", i, k)}
		}
		seen[j.ID] = i
		out[i] = j
	}
	create := out
	if len(s.cfg.Hooks) > 0 {
		existing, admitted, aerr := s.admit(ctx, out)
		if aerr != nil {
			return nil, aerr
		}
		defer func() { admitted(err) }()
		if existing != nil {
			// Jobs answered by an existing job take its place in the
			// answer and are not created.
			create = make([]*ojs.Job, 0, len(out))
			for i, j := range out {
				if existing[i] != nil {
					out[i] = existing[i]
					continue
				}
				create = append(create, j)
			}
			if len(create) == 0 {
				return out, nil
			}
		}
	}
	if s.seedsAll(create) {
		return out, s.seedBatch(ctx, create, clientIDs)
	}
	var named []*ojs.Job
	for _, j := range create {
		if clientIDs[j.ID] && j.State != ojs.StateAvailable {
			named = append(named, j)
		}
	}
	if err := s.store.SeedTaken(ctx, named); err != nil {
		return nil, err
	}
	for _, j := range create {
		done := s.beginCreate(j.ID)
		defer done()
	}
	undo, err := s.reserveDepth(ctx, create, func() error { return s.publishInitialBatch(ctx, create, clientIDs) })
	if err != nil {
		return nil, err
	}
	defer func() { undoDepth(undo, err) }()
	if err := s.store.CreateBatch(ctx, create); err != nil {
		return nil, err
	}
	if err := s.store.CheckNoSeed(ctx, named); err != nil {
		// All or nothing: the batch's other records go too.
		s.store.RemoveRecords(create)
		return nil, err
	}
	for _, j := range create {
		s.enqueued(ctx, j)
	}
	return out, nil
}

// seedsAll reports whether every job of a batch is stored as its ready
// message alone (seeds).
func (s *Service) seedsAll(jobs []*ojs.Job) bool {
	for _, j := range jobs {
		if !s.seeds(j) {
			return false
		}
	}
	return true
}

// seedBatch enqueues a batch of jobs that are all stored as their ready
// messages alone: one atomic batch on the ready stream, after their
// expire timers.
func (s *Service) seedBatch(ctx context.Context, jobs []*ojs.Job, named map[string]bool) error {
	for _, j := range jobs {
		if err := s.armExpiry(ctx, j); err != nil {
			return err
		}
	}
	if err := s.store.PublishSeedBatch(ctx, jobs, named); err != nil {
		return err
	}
	for _, j := range jobs {
		j.Seed = true
		s.records.put(j, j.Rev)
		s.enqueued(ctx, j)
	}
	return nil
}

func (s *Service) publishInitialBatch(ctx context.Context, jobs []*ojs.Job, named map[string]bool) error {
	var ready []*ojs.Job
	for _, j := range jobs {
		if j.State == ojs.StateAvailable {
			if err := s.armExpiry(ctx, j); err != nil {
				return err
			}
			ready = append(ready, j)
			continue
		}
		if err := s.publishInitial(ctx, j, false); err != nil {
			return err
		}
	}
	return s.store.PublishReadyBatch(ctx, ready, named)
}
