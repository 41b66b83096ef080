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
// one after the other): a claim counts its start (acquireLimits) only
// after every earlier claim that must pass one of the same
// entries has passed, that is, had its start counted, or was refused and
// went where its on_limit sends it (parked, rescheduled, dropped), or
// ended otherwise. Each claim names its entries as soon as it has read its
// job (limitChecks); a later claim waits for that before deciding whether
// it must wait. The records are still read, and the records of jobs
// without limits written, in parallel: only the limit updates of jobs that
// share an entry run one after the other, each still one compare-and-swap,
// and a fetch of jobs without limits waits for nothing. Claims in other
// processes are not ordered with these: fetches there race for the limits
// as concurrent fetches of different workers do, each from the messages
// JetStream handed it.

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
	// entries is set before known is closed.
	entries  []string
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
		close(t.known)
	})
}

// await waits until every earlier claim sharing an entry with this one
// has passed.
func (t *claimTurn) await(ctx context.Context) error {
	if t == nil || len(t.entries) == 0 {
		return nil
	}
	if earlier := t.o.earlier.Load(); earlier != nil {
		for _, o := range *earlier {
			if err := t.after(ctx, o.turns); err != nil {
				return err
			}
		}
	}
	return t.after(ctx, t.o.turns[:t.i])
}

// after waits until every turn of turns sharing an entry with t passed.
func (t *claimTurn) after(ctx context.Context, turns []*claimTurn) error {
	for _, e := range turns {
		select {
		case <-e.known:
		case <-ctx.Done():
			return jobstore.Unavailable(ctx.Err())
		}
		if !slices.ContainsFunc(e.entries, func(n string) bool { return slices.Contains(t.entries, n) }) {
			continue
		}
		select {
		case <-e.passed:
		case <-ctx.Done():
			return jobstore.Unavailable(ctx.Err())
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
