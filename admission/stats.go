package admission

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetgate/jetgate/admission/ojs"
	"github.com/jetgate/jetgate/jetstream/jobstore"
	"github.com/jetgate/jetgate/jetstream/topology"
)

// Queue statistics are aggregated in each process and flushed once a
// second: per-state counts as counter CRDT increments (stream OJS_COUNTS),
// and activity samples (completions, failures, durations, waits) into the
// one-hour stream OJS_STATS. Counts are therefore exact up to the last
// second of a process that crashed; they are statistics, never used for a
// scheduling decision.
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

// move records a job leaving state from (empty: new) for state to (empty: deleted).
func (a *statsAgg) move(queue string, prio int, from, to ojs.State) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if from != "" {
		a.counts[countKey{queue, string(from)}]--
		if from == ojs.StateAvailable {
			a.counts[countKey{queue, availableAt(prio)}]--
		}
	}
	if to != "" {
		a.counts[countKey{queue, string(to)}]++
		if to == ojs.StateAvailable {
			a.counts[countKey{queue, availableAt(prio)}]++
		}
	}
}

// availablePrefix starts the counter names of available jobs per
// priority: available_p002 for priority 2.
const availablePrefix = "available_p"

func availableAt(prio int) string {
	return fmt.Sprintf("%s%0*d", availablePrefix, topology.PriorityDigits, prio)
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

// counter reads one counter CRDT; a counter never incremented is 0.
func (s *Service) counter(ctx context.Context, queue, name string) (int64, error) {
	m, err := s.assets.Counts.GetLastMsgForSubject(ctx, topology.CountSubject(queue, name))
	if err != nil {
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return 0, nil
		}
		return 0, fmt.Errorf("read counter %s/%s: %w", queue, name, jobstore.Unavailable(err))
	}
	var v struct {
		Val string `json:"val"`
	}
	if err := json.Unmarshal(m.Data, &v); err != nil {
		return 0, fmt.Errorf("decode counter %s/%s: %w", queue, name, err)
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
	cons, err := s.js.OrderedConsumer(ctx, topology.StatStream, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{subj},
		DeliverPolicy:  jetstream.DeliverByStartTimePolicy,
		OptStartTime:   ptr(now.Add(-topology.StatWindow)),
	})
	if err != nil {
		return hour, minute, fmt.Errorf("stats of %s: %w", queue, jobstore.Unavailable(err))
	}
	for {
		batch, err := cons.Fetch(500, jetstream.FetchMaxWait(500*time.Millisecond))
		if err != nil {
			return hour, minute, fmt.Errorf("stats of %s: %w", queue, jobstore.Unavailable(err))
		}
		var last uint64 = 1
		n := 0
		for m := range batch.Messages() {
			n++
			var smp statSample
			if json.Unmarshal(m.Data(), &smp) != nil {
				continue
			}
			add(&hour, smp)
			md, err := m.Metadata()
			if err != nil {
				continue
			}
			if now.Sub(md.Timestamp) <= time.Minute {
				add(&minute, smp)
			}
			last = md.NumPending
		}
		if n == 0 || last == 0 {
			return hour, minute, nil
		}
	}
}

func ptr[T any](v T) *T { return &v }

// StateDepths returns the number of jobs per state of every known queue,
// for the ojs.queue.depth gauge. A queue whose counters cannot be read is
// left out of this scrape.
func (s *Service) StateDepths(ctx context.Context) map[string]map[ojs.State]int64 {
	out := map[string]map[ojs.State]int64{}
	for _, q := range s.queues.list() {
		if n, err := s.stateCounts(ctx, q.Name, depthStates); err == nil {
			out[q.Name] = n
		}
	}
	return out
}

// stateCounts returns a queue's jobs in each of states: the counters in
// JetStream plus this process's unflushed deltas, never below 0.
func (s *Service) stateCounts(ctx context.Context, queue string, states []ojs.State) (map[ojs.State]int64, error) {
	out := make(map[ojs.State]int64, len(states))
	err := s.stats.consistent(func() error {
		local, _ := s.stats.pending(queue)
		for _, st := range states {
			n, err := s.counter(ctx, queue, string(st))
			if err != nil {
				return err
			}
			out[st] = max(0, n+local[string(st)])
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// depthStates are the non-terminal states a queue's depth is reported for.
var depthStates = []ojs.State{ojs.StateAvailable, ojs.StateActive, ojs.StateScheduled, ojs.StateRetryable, ojs.StatePending}
