package admission

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetgate/jetgate/admission/ojs"
	"github.com/jetgate/jetgate/jetstream/jobstore"
	"github.com/jetgate/jetgate/jetstream/topology"
)

// Priority aging (ojs-priority.md 8.2), on for the queues whose record
// sets Aging.
//
// It is decided at fetch time and writes nothing: no timers, no
// republishing, and the stored priority never changes. A fetch from an
// aging queue looks at the next undelivered ready message of every level
// above MinPriority (the next message of the level's subjects after its
// consumer's delivered sequence, which the level lookup's consumer infos
// tell), takes its age from the message's stream timestamp, and tries the
// levels in order of effective priority, equal ones lowest stored
// priority first. Within a level the order stays FIFO. One request bounds
// the age of every level's head (ageLevels); while that bound is younger
// than one interval nothing ages and that is all. Otherwise each level
// that could age at that age costs one more request per pull, made in
// parallel. Queues without aging pay nothing.
//
// The age is how long the job has been ready: since its enqueue, or since
// it last became available (scheduled time reached, retry backoff over,
// priority changed). Messages put back after a failed claim are not
// looked at, so a level may age a little later than its oldest job, never
// earlier.

// maxAgingLookups bounds the level lookups of one pull in flight at once.
const maxAgingLookups = 16

// QueueAging returns a queue's aging; Aging is nil when it has none.
func (s *Service) QueueAging(ctx context.Context, queue string) (*ojs.QueueAging, error) {
	q, ok := s.queues.get(queue)
	if !ok {
		rec, err := s.store.GetQueue(ctx, queue)
		if err != nil {
			return nil, err
		}
		s.queues.put(rec)
		q = rec
	}
	return &ojs.QueueAging{Queue: queue, Aging: q.Aging}, nil
}

// SetQueueAging sets (nil: removes) a queue's aging. A queue that does not
// exist yet is created. Every jetgate process follows the change through
// its queue cache.
func (s *Service) SetQueueAging(ctx context.Context, queue string, a *ojs.Aging) (*ojs.QueueAging, error) {
	if a != nil {
		if err := a.Validate("aging."); err != nil {
			return nil, err
		}
		c := *a
		a = &c
	}
	q, _, err := s.updateQueue(ctx, queue, func(q *jobstore.QueueRecord) bool {
		q.Aging = a
		return true
	})
	if err != nil {
		return nil, err
	}
	return &ojs.QueueAging{Queue: queue, Aging: q.Aging}, nil
}

// agingOf returns the queue's aging, if it has one.
func (s *Service) agingOf(queue string) (ojs.Aging, bool) {
	q, ok := s.queues.get(queue)
	if !ok || q.Aging == nil {
		return ojs.Aging{}, false
	}
	return *q.Aging, true
}

// fetchLevels lists the levels of a queue that may hold ready messages in
// the order a fetch tries them: ascending, or by effective priority in a
// queue with aging, and each registered level's count (levels.go).
func (s *Service) fetchLevels(ctx context.Context, queue string) ([]int, map[int]uint64, error) {
	levels, counts, infos, err := s.levels(ctx, queue)
	if err != nil {
		return nil, nil, err
	}
	if a, ok := s.agingOf(queue); ok && len(levels) > 1 {
		levels = s.ageLevels(ctx, queue, levels, infos, a)
	}
	return levels, counts, nil
}

// ageLevels orders a queue's ready levels (ascending) by effective
// priority under a, equal ones by stored priority. A level whose head
// cannot be looked up keeps its stored priority.
//
// The heads are found without matching the queue's subjects from the
// start of the stream (a wildcard read there walks every job of every
// queue): a level's head is its next undelivered message, so it comes
// after the consumer's delivered sequence (infos). The message stored
// first after the lowest of those sequences, whatever its subject (a
// read of the next message on ">", which the server answers without
// matching subjects), is no younger than any level's head: while it is younger than one interval nothing ages, and a
// level that would not age even at its age is not looked up. Each other
// level costs one read of its next message after its delivered sequence,
// which stops at the level's head (the level has undelivered messages):
// it walks only the messages stored between the level's last delivery
// and its head. A level without a consumer (levels.go) is read from the
// start of the stream, which the server answers from the level's own
// subjects (as creating its consumer would). The alternative, taking the
// head through the level consumer itself, would hand the message out and
// put it back on every pull. Measured (go test -run '^$' -bench
// FetchAging -benchtime 2000x ./admission, 10 levels, two quiet runs each
// on the 2-core VM), µs per job before (the queue's oldest message by a
// wildcard read from sequence 1, the heads after a consumer info each)
// and after: no aging 346-351, now 252-274; aging, all jobs younger than
// the interval 591-613, now 256-265; every level aging 567-654, now
// 271-278 (allocations per job 1,670-2,366, now 463-514).
func (s *Service) ageLevels(ctx context.Context, queue string, levels []int, infos map[int]levelInfo, a ojs.Aging) []int {
	now := s.now()
	var from uint64
	for _, p := range levels {
		if in := infos[p]; (in.pending > 0 || in.missing) && (from == 0 || in.delivered+1 < from) {
			from = in.delivered + 1
		}
	}
	if from == 0 {
		return levels
	}
	first, err := s.assets.Ready.GetMsg(ctx, from, jetstream.WithGetMsgSubject(">"))
	if err != nil {
		return levels
	}
	maxAge := now.Sub(first.Time)
	if maxAge < a.Interval {
		return levels
	}
	eff := make([]int, len(levels))
	sem := make(chan struct{}, maxAgingLookups)
	var wg sync.WaitGroup
	for i, p := range levels {
		eff[i] = p
		in := infos[p]
		if (in.pending == 0 && !in.missing) || a.Effective(p, maxAge) == p {
			continue
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if t, ok := s.levelHead(ctx, queue, p, in.delivered); ok {
				eff[i] = a.Effective(p, now.Sub(t))
			}
		}()
	}
	wg.Wait()
	idx := make([]int, len(levels))
	for i := range idx {
		idx[i] = i
	}
	// levels is ascending, so a stable sort on the effective priority
	// breaks ties by stored priority.
	slices.SortStableFunc(idx, func(x, y int) int { return eff[x] - eff[y] })
	out := make([]int, len(levels))
	for i, x := range idx {
		out[i] = levels[x]
	}
	return out
}

// levelHead returns the stream timestamp of the next message of a level
// after its consumer's delivered sequence (ok false when there is none,
// or on error).
func (s *Service) levelHead(ctx context.Context, queue string, prio int, delivered uint64) (time.Time, bool) {
	msg, err := s.assets.Ready.GetMsg(ctx, delivered+1, jetstream.WithGetMsgSubject(topology.ReadyLevelFilter(queue, prio)))
	if err != nil {
		return time.Time{}, false
	}
	return msg.Time, true
}
