package admission

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetgate/jetgate/admission/ojs"
	"github.com/jetgate/jetgate/jetstream/jobstore"
	"github.com/jetgate/jetgate/jetstream/topology"
)

// Queue statistics: how many jobs each queue holds per state, and what it
// did over the last hour.
//
// Each number comes from where its jobs are, so that it comes back to the
// truth after any crash (issue 31: per-process counters that a kill -9
// robbed of their last second stayed wrong for good, and a counter below
// zero hid every later job):
//
//   - available, per priority level: the ready stream itself. A level's
//     consumer counts the messages of its subjects, pending plus
//     ack-pending, as the server keeps them (one consumer info per level;
//     levels.go; a level whose consumer is gone gets it again, which
//     counts its messages once). From that count the reader takes away
//     the ready messages an active job's claim still holds (held_pNNN:
//     the lease deferral of lease.go, a third of the consumers' AckWait,
//     or until acked when the claiming process died: heldcheck.go) and
//     the ready messages that no record accounts for, left by a process
//     that died between a transition's ready message and its record write
//     (orphan_pNNN: orphans.go), and adds the available jobs parked on a
//     rate limit, whose ready message is gone (parked_pNNN). Messages pulled ahead of
//     fetches (prefetch.go) or put back are jobs still available, and
//     count. A transition that takes a job out of available other than
//     a claim removes the job's ready message (dropStaleReady), so a
//     cancelled job does not count either.
//   - active, scheduled, retryable, pending: the job records. One process
//     at a time, the count keeper (countkeeper.go, under a lease in
//     OJS_LEASES), follows every write of the records, headers only, and
//     answers questions about them (held_pNNN, orphan_pNNN and parked_pNNN too) on
//     topology.CountsAskSubject once it has read every record written
//     before the question: a reader sees its own changes. It also writes
//     the numbers into OJS_COUNTS once a second, which readers take when
//     no keeper answers (one is being replaced). Nothing of them lives in
//     any other process: a process that dies loses none of them, and a
//     keeper that dies is replaced within topology.LeaseTTL by one that
//     reads every record again.
//   - completed, cancelled, discarded: cumulative counters, kept as
//     before: each process aggregates its finished jobs in memory and
//     flushes them once a second as counter increments (Nats-Incr) to
//     OJS_COUNTS, with activity samples (completions, failures,
//     durations, waits) into the one-hour stream OJS_STATS. A process
//     killed loses at most its last second of them; records expire after
//     their retention, so these are counts of events, not of records.
//
// Readers (QueueStats, PriorityStats, StateCounts and every reader on top
// of them: the admin API, the ojs_queue_depth metric, the dashboard) never
// show a number below zero.
//
// What it costs. Per job: no stored message (the default path stays at 3
// stored per job); each record write carries a summary header of about 40
// bytes (jobstore.HeaderStat) and is delivered once more, headers only, to
// the keeper: two deliveries per job on the default path (the record at
// claim and at completion). Per read of a queue: one question to the
// keeper (which asks the jobs stream's info once per question), one
// batched direct get of its counters (ojs.count.<queue>.>) and one
// consumer info per priority level it has used, none of them depending on
// the number of jobs (the metric asks the keeper once for all queues). The
// keeper remembers, per job available with a record, active, scheduled,
// retryable or pending, its queue, priority and state (about 100 bytes
// each); a new keeper reads every record of OJS_JOBS once, finished ones
// included, before it writes (headers only). It reads the parked jobs'
// wait messages again when the wait stream changed, at most every two
// seconds (a scan without consumer: batched direct gets on one server,
// one get per waiter through the leader on a cluster), and asks the wait
// stream's info once a second. While claims hold ready messages it reads
// the holder sentinels once a second, and after a process died holding
// some it looks up the held messages past their deferral by subject
// until they are acked (heldcheck.go). It asks the ready stream's info
// once a second and, while that holds more messages than the records
// account for, looks at the levels and reads those where the excess stays
// to find the orphans (orphans.go, which says what that costs).
//
// What a crash costs. A process killed: up to one second of its finished
// jobs (completed, cancelled, discarded and the samples); nothing else. The
// keeper's process killed: readers take the numbers it wrote last until the
// next keeper has taken the lease (at most topology.LeaseTTL) and read the
// records again; they are then the truth. Whatever crashed, the
// ready stream answers for available at once. A message held by a claim
// whose process died counts held until it is acked (by the sentinel's
// walk or a fetch): the keeper looks for such messages once the process's
// holder sentinel is stale (heldcheck.go), so one counts available only
// if its deferral ran out before that, at most 9 s after the death (at
// the default ClaimAckWait). The ready message of a transition whose
// record write never came (a bounded enqueue, a batch that was not all
// seeds, a retry) stops counting once the keeper finds it, about 4 s
// after it was published (orphans.go); it is still dropped by the fetch
// that meets it after orphanWindow. A seed counts while it is in the
// stream: one of a batch left pending until the batch is abandoned
// (BatchWindow) and a fetch drops it.
type statsAgg struct {
	mu      sync.Mutex
	counts  map[countKey]int64
	samples map[string]*statSample

	// flushing is held for writing by a flush from its swap until its
	// publishes have landed, and for reading by a reader that adds this
	// process's unflushed deltas (pending) to what the streams hold
	// (consistent): without it a flush between the two reads counted a
	// delta twice, or not at all while its publish was on its way.
	flushing sync.RWMutex
}

// consistent runs read, which adds pending deltas to what the streams
// hold, while no flush is under way. read must not call consistent again
// (a waiting flush would deadlock it).
func (a *statsAgg) consistent(read func() error) error {
	a.flushing.RLock()
	defer a.flushing.RUnlock()
	return read()
}

type countKey struct{ queue, name string }

// statSample is one process's activity on one queue over one flush period.
type statSample struct {
	Completed  int64 `json:"completed,omitempty"`
	Failed     int64 `json:"failed,omitempty"`
	Started    int64 `json:"started,omitempty"`
	DurationMs int64 `json:"duration_ms,omitempty"`
	WaitMs     int64 `json:"wait_ms,omitempty"`
}

func newStatsAgg() *statsAgg {
	return &statsAgg{counts: map[countKey]int64{}, samples: map[string]*statSample{}}
}

// move records a job leaving state from (empty: new) for state to (empty:
// deleted). Only the finished states are counted here (see statsAgg): the
// others are read from the ready stream and the count keeper.
func (a *statsAgg) move(queue string, _ int, from, to ojs.State) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if from.Terminal() {
		a.counts[countKey{queue, string(from)}]--
	}
	if to.Terminal() {
		a.counts[countKey{queue, string(to)}]++
	}
}

func (a *statsAgg) sample(queue string, f func(*statSample)) {
	a.mu.Lock()
	defer a.mu.Unlock()
	s := a.samples[queue]
	if s == nil {
		s = &statSample{}
		a.samples[queue] = s
	}
	f(s)
}

func (a *statsAgg) swap() (map[countKey]int64, map[string]*statSample) {
	a.mu.Lock()
	defer a.mu.Unlock()
	c, s := a.counts, a.samples
	a.counts, a.samples = map[countKey]int64{}, map[string]*statSample{}
	return c, s
}

// pending returns this process's unflushed deltas of one queue.
func (a *statsAgg) pending(queue string) (map[string]int64, statSample) {
	a.mu.Lock()
	defer a.mu.Unlock()
	c := map[string]int64{}
	for k, v := range a.counts {
		if k.queue == queue {
			c[k.name] = v
		}
	}
	var s statSample
	if p := a.samples[queue]; p != nil {
		s = *p
	}
	return c, s
}

// flush publishes the aggregated deltas. Counter increments and samples are
// published without waiting for acks: a lost flush skews statistics only.
//
// Readers (statsAgg.consistent) wait while a flush is under way, and the
// flush waits for its publishes to land (at most flushWait), so a reader
// counts each delta once: either still pending or already in the streams.
func (s *Service) flushStats() {
	s.stats.flushing.Lock()
	defer s.stats.flushing.Unlock()
	counts, samples := s.stats.swap()
	var futs []jetstream.PubAckFuture
	for k, v := range counts {
		if v == 0 {
			continue
		}
		m := nats.NewMsg(topology.CountSubject(k.queue, k.name))
		m.Header.Set("Nats-Incr", strconv.FormatInt(v, 10))
		f, err := s.js.PublishMsgAsync(m)
		if err != nil {
			s.log.Debug("stats flush failed", "error", err)
			continue
		}
		futs = append(futs, f)
	}
	for q, smp := range samples {
		b, _ := json.Marshal(smp)
		f, err := s.js.PublishAsync(topology.StatSubject(q), b)
		if err != nil {
			s.log.Debug("stats flush failed", "error", err)
			continue
		}
		futs = append(futs, f)
	}
	landed(futs, flushWait)
}

// flushWait bounds how long a stats flush waits for its publishes.
const flushWait = 2 * time.Second

// landed waits until every future has its answer, or wait has passed.
func landed(futs []jetstream.PubAckFuture, wait time.Duration) {
	timeout := time.NewTimer(wait)
	defer timeout.Stop()
	for _, f := range futs {
		select {
		case <-f.Ok():
		case <-f.Err():
		case <-timeout.C:
			return
		}
	}
}

func (s *Service) runStats(ctx context.Context) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			s.flushStats()
			return
		case <-t.C:
			s.flushStats()
		}
	}
}

// QueueStats reports a queue's jobs per state and its activity over the
// last hour.
func (s *Service) QueueStats(ctx context.Context, name string) (*ojs.QueueStats, error) {
	q, ok := s.queues.get(name)
	if !ok {
		rec, err := s.store.GetQueue(ctx, name)
		if err != nil {
			return nil, err
		}
		q = rec
	}
	n, err := s.stateCounts(ctx, name, ojs.States)
	if err != nil {
		return nil, err
	}
	c := ojs.QueueStatsCounts{
		Available: n[ojs.StateAvailable], Active: n[ojs.StateActive], Scheduled: n[ojs.StateScheduled],
		Retryable: n[ojs.StateRetryable], Pending: n[ojs.StatePending], Discarded: n[ojs.StateDiscarded],
		Completed: n[ojs.StateCompleted], Cancelled: n[ojs.StateCancelled],
	}
	var hour, minute statSample
	err = s.stats.consistent(func() error {
		_, localSample := s.stats.pending(name)
		var err error
		if hour, minute, err = s.recentSamples(ctx, name); err != nil {
			return err
		}
		add(&hour, localSample)
		add(&minute, localSample)
		return nil
	})
	if err != nil {
		return nil, err
	}
	c.CompletedLastHour, c.FailedLastHour = hour.Completed, hour.Failed
	if hour.Completed > 0 {
		c.AvgDurationMs = float64(hour.DurationMs) / float64(hour.Completed)
	}
	if hour.Started > 0 {
		c.AvgWaitMs = float64(hour.WaitMs) / float64(hour.Started)
	}
	c.ThroughputPerSecond = float64(minute.Completed) / 60
	p := s.queuePressure(ctx, name)
	if p != nil {
		c.Queue, c.Depth = name, &p.Depth
		if p.MaxDepth > 0 {
			c.Bound = &p.MaxDepth
		}
	}
	c.StartedLastMinute, c.WaitMsLastMinute = minute.Started, minute.WaitMs
	return &ojs.QueueStats{Queue: name, Status: q.Status, Stats: c, ComputedAt: ojs.NewTime(s.now()),
		Backpressure: p}, nil
}

func add(dst *statSample, s statSample) {
	dst.Completed += s.Completed
	dst.Failed += s.Failed
	dst.Started += s.Started
	dst.DurationMs += s.DurationMs
	dst.WaitMs += s.WaitMs
}

// readCounter reads one counter CRDT of stream st by subject; a counter
// never incremented is 0.
func readCounter(ctx context.Context, st jetstream.Stream, subj string) (int64, error) {
	m, err := st.GetLastMsgForSubject(ctx, subj)
	if err != nil {
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return 0, nil
		}
		return 0, fmt.Errorf("read counter %s: %w", subj, jobstore.Unavailable(err))
	}
	return counterValue(subj, m.Data)
}

// counterValue decodes a counter CRDT's message ({"val":"<n>"}).
func counterValue(subj string, data []byte) (int64, error) {
	var v struct {
		Val string `json:"val"`
	}
	if err := json.Unmarshal(data, &v); err != nil {
		return 0, fmt.Errorf("decode counter %s: %w", subj, err)
	}
	n, _ := strconv.ParseInt(v.Val, 10, 64)
	return n, nil
}

// recentSamples sums the samples of the last hour and of the last minute.
func (s *Service) recentSamples(ctx context.Context, queue string) (hour, minute statSample, err error) {
	subj := topology.StatSubject(queue)
	info, err := s.assets.Stats.Info(ctx, jetstream.WithSubjectFilter(subj))
	if err != nil {
		return hour, minute, fmt.Errorf("stats of %s: %w", queue, jobstore.Unavailable(err))
	}
	if info.State.Subjects[subj] == 0 {
		return hour, minute, nil
	}
	now := s.now()
	err = s.readSamples(ctx, subj, now.Add(-topology.StatWindow), func(smp statSample, at time.Time) {
		add(&hour, smp)
		if now.Sub(at) <= time.Minute {
			add(&minute, smp)
		}
	})
	if err != nil {
		return hour, minute, fmt.Errorf("stats of %s: %w", queue, err)
	}
	return hour, minute, nil
}

func ptr[T any](v T) *T { return &v }

// StateDepths returns the number of jobs per state of every known queue,
// for the ojs.queue.depth gauge. A queue whose numbers cannot be read is
// left out of this scrape.
func (s *Service) StateDepths(ctx context.Context) map[string]map[ojs.State]int64 {
	out := map[string]map[ojs.State]int64{}
	for q, c := range s.allQueueCounts(ctx) {
		n := make(map[ojs.State]int64, len(depthStates))
		for _, st := range depthStates {
			n[st] = c.states[st]
		}
		out[q] = n
	}
	return out
}

// allQueueCounts reads the numbers of every known queue, asking the count
// keeper once for all of them; a queue whose numbers cannot be read is
// left out.
func (s *Service) allQueueCounts(ctx context.Context) map[string]*counts {
	qs := s.queues.list()
	names := make([]string, len(qs))
	for i, q := range qs {
		names[i] = q.Name
	}
	kept := s.keptNumbers(ctx, names)
	out := make(map[string]*counts, len(names))
	for _, q := range names {
		var k map[string]int64
		if kept != nil {
			k = kept[q]
			if k == nil {
				k = map[string]int64{}
			}
		}
		if c, err := s.queueCountsWith(ctx, q, k); err == nil {
			out[q] = c
		}
	}
	return out
}

// stateCounts returns a queue's jobs in each of states, never below 0.
func (s *Service) stateCounts(ctx context.Context, queue string, states []ojs.State) (map[ojs.State]int64, error) {
	c, err := s.queueCounts(ctx, queue)
	if err != nil {
		return nil, err
	}
	out := make(map[ojs.State]int64, len(states))
	for _, st := range states {
		out[st] = c.states[st]
	}
	return out, nil
}

// depthStates are the non-terminal states a queue's depth is reported for.
var depthStates = []ojs.State{ojs.StateAvailable, ojs.StateActive, ojs.StateScheduled, ojs.StateRetryable, ojs.StatePending}

// counts are a queue's jobs as the readers report them.
type counts struct {
	// states are the jobs per state.
	states map[ojs.State]int64
	// levels are the available jobs per priority, for levels holding any.
	levels map[int]int64
}

// queueCounts reads a queue's jobs per state and its available jobs per
// priority (see statsAgg for where each number comes from): one question
// to the count keeper, one batched direct get of the queue's counters and
// one consumer info per priority level the queue has used. Nothing is
// below 0.
func (s *Service) queueCounts(ctx context.Context, queue string) (*counts, error) {
	var k map[string]int64
	if kept := s.keptNumbers(ctx, []string{queue}); kept != nil {
		if k = kept[queue]; k == nil {
			k = map[string]int64{}
		}
	}
	return s.queueCountsWith(ctx, queue, k)
}

// queueCountsWith is queueCounts with the keeper's answer for the queue
// (nil: no answer, the counters it wrote last are read instead).
func (s *Service) queueCountsWith(ctx context.Context, queue string, kept map[string]int64) (*counts, error) {
	ready, err := s.readyLevels(ctx, queue)
	if err != nil {
		return nil, err
	}
	out := &counts{states: make(map[ojs.State]int64, len(ojs.States)), levels: map[int]int64{}}
	err = s.stats.consistent(func() error {
		ctr, err := s.queueCounters(ctx, queue)
		if err != nil {
			return err
		}
		if kept != nil {
			for name := range ctr {
				if keptName(name) {
					delete(ctr, name)
				}
			}
			for name, n := range kept {
				ctr[name] = n
			}
		}
		local, _ := s.stats.pending(queue)
		for _, st := range ojs.States {
			switch {
			case st == ojs.StateAvailable:
			case st.Terminal():
				out.states[st] = max(0, ctr[string(st)]+local[string(st)])
			default:
				out.states[st] = max(0, ctr[string(st)])
			}
		}
		for name, n := range ctr {
			if p, ok := levelOf(name, parkedPrefix); ok && n > 0 {
				if _, known := ready[p]; !known {
					ready[p] = 0
				}
			}
		}
		for p, n := range ready {
			if n = max(0, n-max(0, ctr[heldAt(p)])-max(0, ctr[orphanAt(p)])+max(0, ctr[parkedAt(p)])); n > 0 {
				out.levels[p] = n
				out.states[ojs.StateAvailable] += n
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// levelOf reads the priority of a per-level counter name (prefix + the
// zero-padded priority).
func levelOf(name, prefix string) (int, bool) {
	p, ok := strings.CutPrefix(name, prefix)
	if !ok {
		return 0, false
	}
	prio, err := strconv.Atoi(p)
	return prio, err == nil
}

// readyLevels counts the ready messages of each priority level a queue has
// used, from the level consumers (pending plus ack-pending). A level whose
// consumer is gone (removed while idle) gets it again, which counts the
// level's messages once.
func (s *Service) readyLevels(ctx context.Context, queue string) (map[int]int64, error) {
	levels := s.store.Levels(queue)
	out := make(map[int]int64, len(levels))
	if len(levels) == 0 {
		return out, nil
	}
	infos, err := s.levelInfos(ctx, queue, levels)
	if err != nil {
		return nil, err
	}
	for p, in := range infos {
		if in.missing {
			c, err := s.consumer(ctx, queue, p)
			if err != nil {
				return nil, err
			}
			ci := c.CachedInfo()
			in.count = ci.NumPending + uint64(ci.NumAckPending)
		}
		out[p] = int64(in.count)
	}
	return out, nil
}

// queueCounters reads every counter of a queue (ojs.count.<queue>.>) by
// name, with one batched direct get.
func (s *Service) queueCounters(ctx context.Context, queue string) (map[string]int64, error) {
	filter := fmt.Sprintf(topology.CountSubjectPattern, topology.Token(queue), ">")
	msgs, err := s.store.LastPerSubject(ctx, topology.CountStream, filter)
	if err != nil {
		return nil, err
	}
	out := make(map[string]int64, len(msgs))
	for _, m := range msgs {
		n, err := counterValue(m.Subject, m.Data)
		if err != nil {
			return nil, err
		}
		out[m.Subject[strings.LastIndexByte(m.Subject, '.')+1:]] = n
	}
	return out, nil
}

// dropStaleReady removes the ready message a transition left behind when
// it took the job out of available other than by a claim (cancel, expiry,
// a priority change, a limit's reschedule or drop...). Such a message
// used to wait in the ready stream until a fetch of its level met it and
// dropped it as stale; since the ready stream is what the stats count as
// available (statsAgg), it goes now: the job's last ready message, if it
// still carries the token of the job's available state, is deleted by
// sequence (a lookup and a delete; nothing when the job had no ready
// message, as a parked one). A claim keeps its message (it holds it,
// lease.go). Best effort: a message not deleted is dropped when met, as
// before.
func (s *Service) dropStaleReady(ctx context.Context, old, nj *ojs.Job) {
	if old.State != ojs.StateAvailable || nj.State == ojs.StateActive {
		return
	}
	subj := topology.ReadySubject(old.Queue, old.Priority, old.ID)
	if nj.State == ojs.StateAvailable && topology.ReadySubject(nj.Queue, nj.Priority, nj.ID) == subj {
		return // still ready there (a change that keeps its level)
	}
	m, err := s.assets.Ready.GetLastMsgForSubject(ctx, subj)
	if err != nil {
		return
	}
	if m.Header.Get(jobstore.HeaderToken) != old.Internal.Token {
		return
	}
	if err := s.assets.Ready.DeleteMsg(ctx, m.Sequence); err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) {
		s.log.Debug("stale ready message not deleted", "job", old.ID, "error", err)
	}
}
