package jobstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetgate/jetgate/admission/ojs"
	"github.com/jetgate/jetgate/jetstream/topology"
)

// HeaderPromoted marks a ready message released from a rate limit's
// waiters, so the claim knows it already waited its turn.
const HeaderPromoted = "Ojs-Promoted"

// Waiter is a job parked on a rate limit entry.
type Waiter struct {
	MsgRef
	Seq      uint64
	Queue    string
	Priority int
	ParkedAt time.Time
}

// Park stores a waiter for job j on the limit entry named entry. The job
// record does not change: a parked job stays available.
//
// The waiter carries, as HeaderBaseRev, the revision before j.Rev, the
// record revision the parking claim read: a later read of the record at
// that revision or below is behind the park (on a cluster, a stream
// leader just elected may answer before it applied the latest writes),
// and must not be taken for the job having moved on (staleOrEarly in
// admission). Promote carries it on to the ready message.
func (s *Store) Park(ctx context.Context, entry string, j *ojs.Job, at time.Time) error {
	m := nats.NewMsg(topology.WaitSubject(entry, j.Priority))
	m.Header.Set(HeaderJobID, j.ID)
	m.Header.Set(HeaderToken, j.Internal.Token)
	if j.Rev > 1 {
		m.Header.Set(HeaderBaseRev, strconv.FormatUint(j.Rev-1, 10))
	}
	m.Header.Set(HeaderQueue, j.Queue)
	m.Header.Set(HeaderParkedAt, at.UTC().Format(time.RFC3339Nano))
	if _, err := s.js.PublishMsg(ctx, m); err != nil {
		return fmt.Errorf("park %s on %s: %w", j.ID, entry, Unavailable(err))
	}
	return nil
}

// HeaderQueue names the queue of a parked job (its wait message).
const HeaderQueue = "Ojs-Queue"

// HeaderParkedAt is when a job was first parked; promoted ready messages
// carry it on, so the wait a limit caused can be measured at the start.
const HeaderParkedAt = "Ojs-Parked-At"

// ParkedAt reads HeaderParkedAt, or the zero time.
func ParkedAt(h nats.Header) time.Time {
	t, _ := time.Parse(time.RFC3339Nano, h.Get(HeaderParkedAt))
	return t
}

// Waiters returns up to n of the entry's waiters, lowest priority value
// first and oldest first within a priority, leaving out the waiters (by
// their stream sequence) that skip names.
func (s *Store) Waiters(ctx context.Context, entry string, n int, skip func(seq uint64) bool) ([]Waiter, error) {
	if n <= 0 {
		return nil, nil
	}
	levels, err := s.waitLevels(ctx, entry)
	if err != nil {
		return nil, err
	}
	var out []Waiter
	for _, p := range levels {
		subj := topology.WaitSubject(entry, p)
		seq := uint64(1)
		for len(out) < n {
			m, err := s.assets.Wait.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(subj))
			if errors.Is(err, jetstream.ErrMsgNotFound) {
				break
			}
			if err != nil {
				return out, fmt.Errorf("read waiters of %s: %w", entry, Unavailable(err))
			}
			seq = m.Sequence + 1
			ref, ok := Ref(m.Header)
			if !ok {
				_ = s.assets.Wait.DeleteMsg(ctx, m.Sequence)
				continue
			}
			if skip != nil && skip(m.Sequence) {
				continue
			}
			out = append(out, Waiter{MsgRef: ref, Seq: m.Sequence, Queue: m.Header.Get(HeaderQueue), Priority: p, ParkedAt: ParkedAt(m.Header)})
		}
		if len(out) == n {
			break
		}
	}
	return out, nil
}

// waitLevels lists the priority levels of an entry that hold waiters.
func (s *Store) waitLevels(ctx context.Context, entry string) ([]int, error) {
	info, err := s.assets.Wait.Info(ctx, jetstream.WithSubjectFilter(topology.WaitEntryFilter(entry)))
	if err != nil {
		return nil, fmt.Errorf("waiters of %s: %w", entry, Unavailable(err))
	}
	levels := make([]int, 0, len(info.State.Subjects))
	for subj, n := range info.State.Subjects {
		if n == 0 {
			continue
		}
		if p, err := strconv.Atoi(subj[strings.LastIndexByte(subj, '.')+1:]); err == nil {
			levels = append(levels, p)
		}
	}
	slices.Sort(levels)
	return levels, nil
}

// WaitingEntries lists the names of the limit entries that have waiters
// stored, read from the wait stream's subject counts (one request).
func (s *Store) WaitingEntries(ctx context.Context) ([]string, error) {
	info, err := s.assets.Wait.Info(ctx, jetstream.WithSubjectFilter(topology.WaitSubjects))
	if err != nil {
		return nil, fmt.Errorf("entries with waiters: %w", Unavailable(err))
	}
	seen := map[string]bool{}
	for subj, n := range info.State.Subjects {
		toks := strings.Split(subj, ".") // ojs.wait.<entry>.<priority>
		if n == 0 || len(toks) != 4 {
			continue
		}
		if name, err := topology.Untoken(toks[2]); err == nil {
			seen[name] = true
		}
	}
	names := make([]string, 0, len(seen))
	for name := range seen {
		names = append(names, name)
	}
	slices.Sort(names)
	return names, nil
}

// WaitingCount is the number of waiters parked on an entry.
func (s *Store) WaitingCount(ctx context.Context, entry string) (int, error) {
	info, err := s.assets.Wait.Info(ctx, jetstream.WithSubjectFilter(topology.WaitEntryFilter(entry)))
	if err != nil {
		return 0, fmt.Errorf("waiters of %s: %w", entry, Unavailable(err))
	}
	var n uint64
	for _, c := range info.State.Subjects {
		n += c
	}
	return int(n), nil
}

// Promote puts a waiter back on its ready subject, marked as promoted,
// then removes the waiter. The ready message is deduplicated by the
// waiter's sequence, so two processes promoting the same waiter publish
// it once.
func (s *Store) Promote(ctx context.Context, w Waiter) error {
	m := nats.NewMsg(topology.ReadySubject(w.Queue, w.Priority, w.JobID))
	m.Header.Set(HeaderJobID, w.JobID)
	m.Header.Set(HeaderToken, w.Token)
	m.Header.Set(HeaderPromoted, "1")
	if w.BaseRev > 0 {
		m.Header.Set(HeaderBaseRev, strconv.FormatUint(w.BaseRev, 10))
	}
	if !w.ParkedAt.IsZero() {
		m.Header.Set(HeaderParkedAt, w.ParkedAt.UTC().Format(time.RFC3339Nano))
	}
	m.Header.Set(jetstream.MsgIDHeader, w.JobID+":"+w.Token+":w"+strconv.FormatUint(w.Seq, 10))
	if err := s.publishReady(ctx, w.Queue, w.Priority, m); err != nil {
		return fmt.Errorf("promote %s: %w", w.JobID, Unavailable(err))
	}
	// A waiter already removed (by another process promoting it too) is
	// fine; a waiter left behind is promoted again later and its ready
	// message deduplicated or found stale.
	_ = s.assets.Wait.DeleteMsg(ctx, w.Seq)
	return nil
}

// Drop removes a waiter whose job moved on.
func (s *Store) Drop(ctx context.Context, w Waiter) {
	_ = s.assets.Wait.DeleteMsg(ctx, w.Seq)
}

// SetLimitTimer schedules the limit timer of an entry at t: when it fires,
// the entry's waiters are looked at again. A later call replaces it.
func (s *Store) SetLimitTimer(ctx context.Context, entry string, at time.Time) error {
	return s.SetTimer(ctx, topology.TimerLimit, entry, "-", at)
}

// Promoted reports whether a ready message was released from waiters.
func Promoted(h nats.Header) bool { return h.Get(HeaderPromoted) != "" }

// ScanWaiters reads the waiters of every entry stored at or after sequence
// from, at most max of them, and calls fn with each until fn returns false
// (a scan, scan.go: batched direct gets on one server, one get per waiter
// through the leader on a cluster; no consumer).
func (s *Store) ScanWaiters(ctx context.Context, from uint64, max int, fn func(Waiter) bool) (ScanPos, error) {
	return s.scan(ctx, s.assets.Wait, topology.WaitStream, topology.WaitSubjects, from, max, func(m *jetstream.RawStreamMsg) bool {
		ref, ok := Ref(m.Header)
		if !ok {
			return true
		}
		p, err := strconv.Atoi(m.Subject[strings.LastIndexByte(m.Subject, '.')+1:])
		if err != nil {
			return true
		}
		return fn(Waiter{MsgRef: ref, Seq: m.Sequence, Queue: m.Header.Get(HeaderQueue), Priority: p, ParkedAt: ParkedAt(m.Header)})
	})
}
