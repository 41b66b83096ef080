package unique

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetgate/jetgate/admission"
	"github.com/jetgate/jetgate/admission/ojs"
	"github.com/jetgate/jetgate/jetstream/topology"
)

// Config configures Keys.
type Config struct {
	// JS publishes the compare-and-swaps that carry a TTL; KV is the
	// unique key bucket (topology.Assets.Unique).
	JS jetstream.JetStream
	KV jetstream.KeyValue
	// Grace is how long a key naming a job that does not exist is still
	// held: the job's create may be under way (after a blocking
	// backpressure wait, or a slow store). After it the key is free: the
	// process that claimed it died before creating the job. Default 2 min.
	Grace time.Duration
	// Wait is how long an enqueue that meets a key whose job does not
	// exist yet waits for that job's record (default 5 s).
	Wait   time.Duration
	Logger *slog.Logger
	// Now tells the time (default time.Now).
	Now func() time.Time
}

// Keys enforces unique policies; it is an admission.Lifecycle.
type Keys struct {
	cfg Config
}

var _ admission.Lifecycle = (*Keys)(nil)

// New returns the unique jobs hook over cfg.KV.
func New(cfg Config) *Keys {
	if cfg.Grace <= 0 {
		cfg.Grace = 2 * time.Minute
	}
	if cfg.Wait <= 0 {
		cfg.Wait = 5 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Keys{cfg: cfg}
}

// entry is a key's value: the job holding it.
type entry struct {
	JobID string `json:"job_id"`
	// ClaimedAt is when the key was taken; with Grace it bounds how long
	// a key whose job does not exist is held.
	ClaimedAt time.Time `json:"claimed_at"`
	// ExpiresAt is the holder's created_at plus its period (nil: none).
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
}

// claimed is a key this enqueue took, released if the create fails.
type claimed struct {
	key string
	rev uint64
}

// Admit claims the unique key of every job of batch that has a policy.
func (k *Keys) Admit(ctx context.Context, jobs admission.Jobs, batch []*ojs.Job) (admission.Admission, error) {
	var (
		taken    []claimed
		existing []*ojs.Job
		seen     map[string]int
	)
	release := func(ctx context.Context) {
		for _, c := range taken {
			if err := k.cfg.KV.Delete(ctx, c.key, jetstream.LastRevision(c.rev)); err != nil {
				k.cfg.Logger.Warn("unique key not released after a failed enqueue; it frees itself once its job reads as missing",
					"error", err)
			}
		}
	}
	fail := func(err error) (admission.Admission, error) {
		release(context.WithoutCancel(ctx))
		return admission.Admission{}, err
	}
	for i, j := range batch {
		if len(j.Unique) == 0 {
			continue
		}
		prefix := "unique."
		if len(batch) > 1 {
			prefix = fmt.Sprintf("jobs[%d].unique.", i)
		}
		p, err := Parse(j, prefix)
		if err != nil || p == nil {
			if err != nil {
				return fail(err)
			}
			continue
		}
		if existing == nil {
			existing = make([]*ojs.Job, len(batch))
			seen = make(map[string]int)
		}
		if first, dup := seen[p.Key]; dup {
			// A duplicate inside the batch: its holder is the earlier job.
			if p.OnConflict != OnConflictIgnore {
				return fail(&ojs.DuplicateError{ExistingID: batch[first].ID, UniqueKey: p.Name})
			}
			existing[i] = batch[first]
			if existing[first] != nil {
				existing[i] = existing[first]
			}
			continue
		}
		seen[p.Key] = i
		holder, rev, err := k.claim(ctx, jobs, j, p)
		if err != nil {
			return fail(err)
		}
		if holder != nil {
			existing[i] = holder
			continue
		}
		taken = append(taken, claimed{key: topology.Token(p.Key), rev: rev})
	}
	a := admission.Admission{Existing: existing}
	if len(taken) > 0 {
		a.Done = func(ctx context.Context, err error) {
			if err != nil {
				release(ctx)
			}
		}
	}
	return a, nil
}

const maxClaimAttempts = 16

// claim takes p's key for j. It returns the existing job that answers j
// (on_conflict ignore) or the revision of the key it took.
func (k *Keys) claim(ctx context.Context, jobs admission.Jobs, j *ojs.Job, p *Policy) (*ojs.Job, uint64, error) {
	key := topology.Token(p.Key)
	mine := entry{JobID: j.ID, ClaimedAt: k.cfg.Now().UTC()}
	if p.Period > 0 {
		t := j.CreatedAt.Time.Add(p.Period)
		mine.ExpiresAt = &t
	}
	val, err := json.Marshal(mine)
	if err != nil {
		return nil, 0, err
	}
	for range maxClaimAttempts {
		rev, err := k.create(ctx, key, val, p.Period)
		if err == nil {
			return nil, rev, nil
		}
		if !errors.Is(err, jetstream.ErrKeyExists) {
			return nil, 0, unavailable(err)
		}
		e, err := k.cfg.KV.Get(ctx, key)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue
		}
		if err != nil {
			return nil, 0, unavailable(err)
		}
		var cur entry
		if err := json.Unmarshal(e.Value(), &cur); err != nil {
			cur = entry{} // unreadable: free
		}
		holder, err := k.holder(ctx, jobs, cur, p)
		if err != nil {
			return nil, 0, err
		}
		if holder == nil {
			// The key is stale: its job left the counted states, its
			// period is over, or it was never created.
			rev, err := k.update(ctx, key, val, e.Revision(), p.Period)
			if errors.Is(err, errLost) {
				continue
			}
			if err != nil {
				return nil, 0, err
			}
			return nil, rev, nil
		}
		if k.upgrade(ctx, jobs, j, p, holder) {
			holder.Priority = j.Priority
		}
		switch p.OnConflict {
		case OnConflictIgnore:
			return holder, 0, nil
		case OnConflictReplace, OnConflictReplaceExceptSchedule:
			ok, err := k.replace(ctx, jobs, j, p, holder)
			if err != nil {
				return nil, 0, err
			}
			if !ok {
				continue // the holder moved on: look again
			}
			rev, err := k.update(ctx, key, val, e.Revision(), p.Period)
			if errors.Is(err, errLost) {
				continue
			}
			if err != nil {
				return nil, 0, err
			}
			return nil, rev, nil
		}
		return nil, 0, &ojs.DuplicateError{ExistingID: holder.ID, UniqueKey: p.Name}
	}
	return nil, 0, fmt.Errorf("%w: unique key %s kept changing under %d attempts", ojs.ErrConflict, p.Name, maxClaimAttempts)
}

// holder returns the job a key entry names if it makes a duplicate under
// p: it exists (or is being created), is in a counted state, and its
// period is not over. nil: the key is free.
func (k *Keys) holder(ctx context.Context, jobs admission.Jobs, cur entry, p *Policy) (*ojs.Job, error) {
	now := k.cfg.Now()
	if cur.JobID == "" || (cur.ExpiresAt != nil && !now.Before(*cur.ExpiresAt)) {
		return nil, nil
	}
	deadline := now.Add(k.cfg.Wait)
	for {
		h, err := jobs.Get(ctx, cur.JobID)
		if err == nil {
			if !p.Counts(h.State) {
				return nil, nil
			}
			if p.Period > 0 && !k.cfg.Now().Before(h.CreatedAt.Time.Add(p.Period)) {
				return nil, nil
			}
			return h, nil
		}
		if !errors.Is(err, ojs.ErrNotFound) {
			return nil, err
		}
		now = k.cfg.Now()
		if now.Sub(cur.ClaimedAt) >= k.cfg.Grace {
			return nil, nil // claimed by a process that never created the job
		}
		if now.After(deadline) {
			// Its create is under way somewhere: the producer may retry.
			return nil, fmt.Errorf("%w: unique key %s is held by job %s, whose create has not finished", ojs.ErrConflict, p.Name, cur.JobID)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// upgrade raises holder to j's priority when p opts in and j's is higher
// (a lower number; ojs-priority.md 9.3), through admission's SetPriority
// (allowed for available and scheduled jobs). It reports whether it did.
func (k *Keys) upgrade(ctx context.Context, jobs admission.Jobs, j *ojs.Job, p *Policy, holder *ojs.Job) bool {
	if !p.UpgradePriority || j.Priority >= holder.Priority {
		return false
	}
	if _, err := jobs.SetPriority(ctx, holder.ID, j.Priority); err != nil {
		k.cfg.Logger.Debug("unique duplicate: holder's priority not raised", "job", holder.ID, "error", err)
		return false
	}
	return true
}

// replace cancels holder so that j takes its place (ojs-unique-jobs.md
// 5.2). An active holder is not replaced: the enqueue is refused as a
// duplicate (5.2 allows replacing it only with strong replace, and a
// worker may be mid-execution). false: the holder moved on between the
// read and the cancel; the caller looks again.
func (k *Keys) replace(ctx context.Context, jobs admission.Jobs, j *ojs.Job, p *Policy, holder *ojs.Job) (bool, error) {
	if holder.State == ojs.StateActive {
		return false, &ojs.DuplicateError{ExistingID: holder.ID, UniqueKey: p.Name}
	}
	if p.OnConflict == OnConflictReplaceExceptSchedule && holder.State == ojs.StateScheduled && holder.ScheduledAt != nil && !j.Pending {
		// Keep the holder's schedule (5.3).
		j.ScheduledAt = holder.ScheduledAt
		if holder.ScheduledAt.After(k.cfg.Now()) {
			j.State = ojs.StateScheduled
			j.EnqueuedAt = nil
		}
	}
	_, _, err := jobs.Cancel(ctx, holder.ID)
	if err == nil || errors.Is(err, ojs.ErrNotFound) {
		return true, nil
	}
	if errors.Is(err, ojs.ErrInvalidState) {
		return false, nil
	}
	return false, err
}

var errLost = errors.New("unique key changed")

// create takes key if nobody holds it, with the period as TTL.
func (k *Keys) create(ctx context.Context, key string, val []byte, period time.Duration) (uint64, error) {
	if period > 0 {
		return k.cfg.KV.Create(ctx, key, val, jetstream.KeyTTL(ttl(period)))
	}
	return k.cfg.KV.Create(ctx, key, val)
}

// update takes key over from the entry at revision rev (one
// compare-and-swap); errLost when another writer changed it first.
func (k *Keys) update(ctx context.Context, key string, val []byte, rev uint64, period time.Duration) (uint64, error) {
	if period <= 0 {
		nrev, err := k.cfg.KV.Update(ctx, key, val, rev)
		if errors.Is(err, jetstream.ErrKeyRevisionMismatch) || errors.Is(err, jetstream.ErrKeyExists) {
			return 0, errLost
		}
		if err != nil {
			return 0, unavailable(err)
		}
		return nrev, nil
	}
	m := nats.NewMsg("$KV." + topology.UniqueBucket + "." + key)
	m.Data = val
	m.Header.Set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatUint(rev, 10))
	m.Header.Set(jetstream.MsgTTLHeader, ttl(period).String())
	ack, err := k.cfg.JS.PublishMsg(ctx, m)
	if err != nil {
		var apiErr *jetstream.APIError
		if errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
			apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant) {
			return 0, errLost
		}
		return 0, unavailable(err)
	}
	return ack.Sequence, nil
}

// ttl is a period as a per-message TTL: whole seconds, at least one, and
// ending no later than ojs.LatestTime (JetStream adds the TTL to the
// message's int64 nanosecond time: a period of a few hundred years would
// wrap around and free the key at once).
func ttl(period time.Duration) time.Duration {
	s := (ojs.SchedulableTTL(time.Now(), period) + time.Second - 1) / time.Second
	return max(s, 1) * time.Second
}

// JobChanged releases j's key when j left the states its policy counts,
// so the next enqueue creates instead of checking the holder.
func (k *Keys) JobChanged(ctx context.Context, j *ojs.Job, from ojs.State) {
	if len(j.Unique) == 0 {
		return
	}
	p, err := Parse(j, "unique.")
	if err != nil || p == nil || !p.Counts(from) || p.Counts(j.State) {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	key := topology.Token(p.Key)
	e, err := k.cfg.KV.Get(ctx, key)
	if err != nil {
		return
	}
	var cur entry
	if json.Unmarshal(e.Value(), &cur) != nil || cur.JobID != j.ID {
		return // held by another job (a replacement, or a later holder)
	}
	if err := k.cfg.KV.Delete(ctx, key, jetstream.LastRevision(e.Revision())); err != nil && !errors.Is(err, jetstream.ErrKeyExists) {
		k.cfg.Logger.Debug("unique key not released; the next enqueue finds it stale", "job", j.ID, "error", err)
	}
}

func unavailable(err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return fmt.Errorf("%w: unique key: %v", ojs.ErrUnavailable, err)
}
