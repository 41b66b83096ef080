package bench

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// segBits sizes the ledger's segments: 64Ki jobs each, allocated as a
// run reaches them, so a time-boxed run needs no job count up front.
const (
	segBits = 16
	segSize = 1 << segBits
	maxSegs = 1024 // 64Mi jobs per run
)

type segment struct {
	done [segSize]atomic.Int32
	sent [segSize]atomic.Int64 // unix ns of the enqueue, when timing
}

// ledger checks that every job of a run was completed exactly once: done
// counts acks per job index (carried in the payload), ids collects the
// job ids acked. With timing on it also records each job's
// enqueue-to-start latency.
type ledger struct {
	segs   [maxSegs]atomic.Pointer[segment]
	grow   sync.Mutex
	acked  atomic.Int64
	timing bool
	// fetches and empty count worker fetches, to see how much of a path's
	// work is polling.
	fetches, empty atomic.Int64

	mu  sync.Mutex
	ids map[string]struct{}
	dup []string
	lat []time.Duration
}

func newLedger(timing bool) *ledger {
	return &ledger{ids: map[string]struct{}{}, timing: timing}
}

func (l *ledger) seg(i int) (*segment, error) {
	k := i >> segBits
	if i < 0 || k >= maxSegs {
		return nil, fmt.Errorf("job index %d out of range", i)
	}
	if s := l.segs[k].Load(); s != nil {
		return s, nil
	}
	l.grow.Lock()
	defer l.grow.Unlock()
	if s := l.segs[k].Load(); s != nil {
		return s, nil
	}
	s := new(segment)
	l.segs[k].Store(s)
	return s, nil
}

// enqueuing records that job i is about to be enqueued.
func (l *ledger) enqueuing(i int) error {
	if !l.timing {
		return nil
	}
	s, err := l.seg(i)
	if err != nil {
		return err
	}
	s.sent[i&(segSize-1)].Store(time.Now().UnixNano())
	return nil
}

// started records that a worker received job i.
func (l *ledger) started(i int) {
	if !l.timing {
		return
	}
	now := time.Now().UnixNano()
	s, err := l.seg(i)
	if err != nil {
		return
	}
	if t := s.sent[i&(segSize-1)].Load(); t > 0 {
		l.mu.Lock()
		l.lat = append(l.lat, time.Duration(now-t))
		l.mu.Unlock()
	}
}

// complete records the ack of job i; id is the job id ("" for raw
// messages, whose index is their identity).
func (l *ledger) complete(i int, id string) error {
	s, err := l.seg(i)
	if err != nil {
		return err
	}
	s.done[i&(segSize-1)].Add(1)
	l.acked.Add(1)
	if id == "" {
		return nil
	}
	l.mu.Lock()
	if _, ok := l.ids[id]; ok {
		l.dup = append(l.dup, id)
	}
	l.ids[id] = struct{}{}
	l.mu.Unlock()
	return nil
}

// fetched records one worker fetch that returned n jobs.
func (l *ledger) fetched(n int) {
	l.fetches.Add(1)
	if n == 0 {
		l.empty.Add(1)
	}
}

// verify fails unless n jobs, all with indexes below upto, were acked
// exactly once and, when ids were recorded, as many distinct ids as jobs
// were acked.
func (l *ledger) verify(n, upto int, withIDs bool) error {
	var once, twice int
	for i := range upto {
		s := l.segs[i>>segBits].Load()
		if s == nil {
			continue
		}
		switch c := s.done[i&(segSize-1)].Load(); {
		case c == 1:
			once++
		case c > 1:
			twice++
		}
	}
	if once != n || twice > 0 || l.acked.Load() != int64(n) {
		return fmt.Errorf("%d of %d jobs completed once, %d more than once (%d acks)", once, n, twice, l.acked.Load())
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if withIDs && (len(l.ids) != n || len(l.dup) > 0) {
		return fmt.Errorf("%d distinct job ids acked for %d jobs (%d ids acked twice)", len(l.ids), n, len(l.dup))
	}
	return nil
}

// crew runs goroutines and keeps the first error; the first error cancels
// the others through ctx.
type crew struct {
	wg     sync.WaitGroup
	once   sync.Once
	err    error
	cancel context.CancelFunc
}

func newCrew(ctx context.Context) (*crew, context.Context) {
	ctx, cancel := context.WithCancel(ctx)
	return &crew{cancel: cancel}, ctx
}

func (c *crew) spawn(f func() error) {
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		if err := f(); err != nil {
			c.once.Do(func() { c.err = err; c.cancel() })
		}
	}()
}

func (c *crew) wait() error {
	c.wg.Wait()
	c.cancel()
	return c.err
}

// idle is how long a worker waits after an empty fetch.
const idle = time.Millisecond

// pause waits idle after an empty fetch, or fails once ctx is done.
func pause(ctx context.Context) error {
	return sleep(ctx, idle)
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("gave up: %w", ctx.Err())
	}
}
