package admission

import (
	"context"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetgate/jetgate/admission/ojs"
	"github.com/jetgate/jetgate/jetstream/jobstore"
	"github.com/jetgate/jetgate/jetstream/topology"
)

// parkedReader counts the parked jobs per queue and priority: the
// waiters in OJS_WAIT whose job the keeper knows available with the
// waiter's token. It asks the wait stream's info once a second and reads
// the waiters again only when the stream changed (its message count or
// sequences), at most every parkedEvery or twenty times as long as the
// last reading took. Reading them is a scan without consumer (jobstore
// ScanWaiters): on a cluster a consumer is a meta-layer proposal, and an
// ordered consumer every 2 s doubled the CPU of the rate limit property
// test on three nodes. Between readings it checks the waiters it read
// against the records the keeper follows, so a parked job cancelled stops
// counting at once.
type parkedReader struct {
	state   [3]uint64 // messages, first and last sequence at the last reading
	waiters []parkedWaiter
	next    time.Time
}

type parkedWaiter struct {
	id, token, queue string
	prio             int
}

// parkedEvery is how often the keeper reads the parked jobs at most.
const parkedEvery = 2 * time.Second

// count sets tl's parked counts; an error leaves the last reading in use.
func (pr *parkedReader) count(ctx context.Context, s *Service, tl *tally) error {
	err := pr.read(ctx, s)
	var out map[gaugeKey]int64
	if len(pr.waiters) > 0 {
		out = map[gaugeKey]int64{}
		tl.mu.Lock()
		for _, w := range pr.waiters {
			if j, ok := tl.jobs[w.id]; ok && j.state == ojs.StateAvailable && j.queue == w.queue && j.token == w.token {
				out[gaugeKey{w.queue, parkedAt(w.prio)}]++
			}
		}
		tl.mu.Unlock()
	}
	tl.setParked(out)
	return err
}

// read reads every waiter of OJS_WAIT, if the stream changed since the
// last reading and that was long enough ago.
func (pr *parkedReader) read(ctx context.Context, s *Service) error {
	now := time.Now()
	if now.Before(pr.next) {
		return nil
	}
	info, err := s.assets.Wait.Info(ctx)
	if err != nil {
		return jobstore.Unavailable(err)
	}
	st := [3]uint64{info.State.Msgs, info.State.FirstSeq, info.State.LastSeq}
	if st == pr.state {
		return nil
	}
	var ws []parkedWaiter
	if st[0] > 0 {
		from := uint64(1)
		for {
			pos, err := s.store.ScanWaiters(ctx, from, math.MaxInt, func(w jobstore.Waiter) bool {
				ws = append(ws, parkedWaiter{id: w.JobID, token: w.Token, queue: topology.Token(w.Queue), prio: w.Priority})
				return true
			})
			if err != nil {
				return err
			}
			if pos.Done {
				break
			}
			from = pos.Next
		}
	}
	pr.state, pr.waiters = st, ws
	pr.next = now.Add(max(parkedEvery, 20*time.Since(now)))
	return nil
}

// gauges writes the keeper's numbers into OJS_COUNTS.
type gauges struct {
	s *Service
	// published is what each of the keeper's counters holds, as far as
	// the keeper knows (the totals its increments' acknowledgements
	// carried).
	published map[gaugeKey]int64
}

// load reads the keeper's counters as they stand.
func (g *gauges) load(ctx context.Context) error {
	info, err := g.s.assets.Counts.Info(ctx, jetstream.WithSubjectFilter(topology.CountSubjects))
	if err != nil {
		return jobstore.Unavailable(err)
	}
	for subj := range info.State.Subjects {
		rest, ok := strings.CutPrefix(subj, strings.TrimSuffix(topology.CountSubjects, ">"))
		i := strings.LastIndexByte(rest, '.')
		if !ok || i < 0 || !keptName(rest[i+1:]) {
			continue
		}
		k := gaugeKey{rest[:i], rest[i+1:]}
		n, err := readCounter(ctx, g.s.assets.Counts, subj)
		if err != nil {
			return err
		}
		g.published[k] = n
	}
	return nil
}

// write moves every counter that differs from want to it.
func (g *gauges) write(ctx context.Context, want map[gaugeKey]int64) {
	type pending struct {
		k   gaugeKey
		fut jetstream.PubAckFuture
	}
	var ps []pending
	incr := func(k gaugeKey, by int64) {
		m := nats.NewMsg(k.subject())
		m.Header.Set("Nats-Incr", strconv.FormatInt(by, 10))
		f, err := g.s.js.PublishMsgAsync(m)
		if err != nil {
			g.s.log.Debug("count keeper: write failed", "subject", k.subject(), "error", err)
			return
		}
		ps = append(ps, pending{k, f})
	}
	for k, n := range want {
		if have := g.published[k]; have != n {
			incr(k, n-have)
		}
	}
	for k, have := range g.published {
		if _, ok := want[k]; !ok && have != 0 {
			incr(k, -have)
		}
	}
	timeout := time.NewTimer(flushWait)
	defer timeout.Stop()
	for _, p := range ps {
		select {
		case ack := <-p.fut.Ok():
			if n, err := strconv.ParseInt(ack.Value, 10, 64); err == nil {
				g.published[p.k] = n
			}
		case err := <-p.fut.Err():
			g.s.log.Debug("count keeper: write failed", "subject", p.k.subject(), "error", err)
		case <-timeout.C:
			return
		case <-ctx.Done():
			return
		}
	}
}
