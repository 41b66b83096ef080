package admission

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/jetgate/jetgate/jetstream/jobstore"
)

// The order in which claims pass rate limits.
//
// A pull hands out its messages in order (priority, then oldest first),
// and their claims run in parallel (claimAll), a fetch's own and those of
// the other fetches the same pull served (puller.go). Under a limit that
// admits only part of them, the order the claims' limit updates landed in
// decided which job started, and the order their refusals were parked in
// decided which waiter went next: under a queue-level concurrency of 1, a
// fetch of 3 over A, B, C could start B or C, and park C before B (issue
// 20; PRI-004, DESIGN invariant 4).
//
// So the claims of a queue's pulls take their turns at the limits in
// message order, entry by entry, across the pulls of this process still
// being claimed (a fetch's later round, or fetches served by the pulls
// one after the other). Each claim names its entries as soon as it has
// read its job (limitChecks). A claim queues its update of an entry
// (acquireLimits) only after every earlier claim naming that entry has
// queued its own, or passed: kvlimits applies the updates of an entry in
// the order they were queued, several in one compare-and-swap when they
// come together, so the starts are counted in message order and the
// claims of a fetch of jobs of one key still share their writes (a fetch
// of 20 costs about 3), rather than one write each. A claim that
// was refused goes where its on_limit sends it (parked, rescheduled,
// dropped) only after every earlier claim sharing one of its entries has
// passed: had its start counted, been sent on its way likewise, or ended
// otherwise; so waiters are parked in message order too. Records are read
// and written in parallel as before, and a claim of a job without limits
// waits for nothing. Claims in other processes are not ordered with these:
// fetches there race for the limits as concurrent fetches of different
// workers do, each from the messages JetStream handed it.

// claimOrder orders the claims of one pull's messages, after those of the
// queue's earlier pulls in this process still under way.
type claimOrder struct {
	turns []*claimTurn
	// earlier are the orders of the queue's earlier pulls that had turns
	// left when this one was made; dropped once this one's turns all
	// passed, so retired orders are not kept alive in a chain.
	earlier atomic.Pointer[[]*claimOrder]
	left    atomic.Int32 // turns not passed yet
	retire  func(*claimOrder)
}

// claimTurn is one message's place in a claimOrder. A nil turn waits for
// nothing.
type claimTurn struct {
	o *claimOrder
	i int
	// entries and queued (one channel per entry, closed once the claim's
	// update of that entry is queued) are set before known is closed.
	entries  []string
	queued   map[string]chan struct{}
	known    chan struct{}
	passed   chan struct{}
	declared sync.Once
	done     sync.Once
}

// newClaimOrder returns the turns of n messages, in message order, after
// those of earlier; retire is called once every turn passed.
func newClaimOrder(n int, earlier []*claimOrder, retire func(*claimOrder)) *claimOrder {
	o := &claimOrder{turns: make([]*claimTurn, n), retire: retire}
	o.earlier.Store(&earlier)
	o.left.Store(int32(n))
	for i := range o.turns {
		o.turns[i] = &claimTurn{o: o, i: i, known: make(chan struct{}), passed: make(chan struct{})}
	}
	return o
}

// declare names the limit entries the claim must pass (none: it waits
// for nothing and no one waits for it). Only the first call counts.
func (t *claimTurn) declare(entries []string) {
	if t == nil {
		return
	}
	t.declared.Do(func() {
		t.entries = entries
		t.queued = make(map[string]chan struct{}, len(entries))
		for _, e := range entries {
			t.queued[e] = make(chan struct{})
		}
		close(t.known)
	})
}

// awaitEntry waits until every earlier claim naming entry has queued its
// update of it, or passed.
func (t *claimTurn) awaitEntry(ctx context.Context, entry string) error {
	if t == nil {
		return nil
	}
	return t.eachEarlier(ctx, func(e *claimTurn) error {
		q, ok := e.queued[entry]
		if !ok {
			return nil
		}
		select {
		case <-q:
		case <-e.passed:
		case <-ctx.Done():
			return jobstore.Unavailable(ctx.Err())
		}
		return nil
	})
}

// markQueued notes that the claim's update of entry is queued. Only the
// claim's own goroutine calls it.
func (t *claimTurn) markQueued(entry string) {
	if t == nil {
		return
	}
	if q, ok := t.queued[entry]; ok {
		select {
		case <-q:
		default:
			close(q)
		}
	}
}

// await waits until every earlier claim sharing an entry with this one
// has passed.
func (t *claimTurn) await(ctx context.Context) error {
	if t == nil || len(t.entries) == 0 {
		return nil
	}
	return t.eachEarlier(ctx, func(e *claimTurn) error {
		if !slices.ContainsFunc(e.entries, func(n string) bool { return slices.Contains(t.entries, n) }) {
			return nil
		}
		select {
		case <-e.passed:
		case <-ctx.Done():
			return jobstore.Unavailable(ctx.Err())
		}
		return nil
	})
}

// eachEarlier calls f with every earlier turn, in order, once it named
// its entries.
func (t *claimTurn) eachEarlier(ctx context.Context, f func(*claimTurn) error) error {
	var earlier []*claimOrder
	if p := t.o.earlier.Load(); p != nil {
		earlier = *p
	}
	for k := 0; k <= len(earlier); k++ {
		turns := t.o.turns[:t.i]
		if k < len(earlier) {
			turns = earlier[k].turns
		}
		for _, e := range turns {
			select {
			case <-e.known:
			case <-ctx.Done():
				return jobstore.Unavailable(ctx.Err())
			}
			if err := f(e); err != nil {
				return err
			}
		}
	}
	return nil
}

// pass lets later claims take their turn. Every message's turn must pass
// once its claim is over or the message is put back unclaimed.
func (t *claimTurn) pass() {
	if t == nil {
		return
	}
	t.declare(nil)
	t.done.Do(func() {
		close(t.passed)
		if t.o.left.Add(-1) == 0 {
			t.o.earlier.Store(nil)
			if t.o.retire != nil {
				t.o.retire(t.o)
			}
		}
	})
}

// passAll passes turns.
func passAll(turns []*claimTurn) {
	for _, t := range turns {
		t.pass()
	}
}
