package admission

import (
	"context"
	"time"

	"github.com/jetgate/jetgate/kvlimits"
)

// TicketGrace is how long past its deadline a blocked producer's ticket
// keeps its place.
const TicketGrace = ticketGrace

// HeaderTicketDeadline is the header of a blocked producer's ticket that
// holds its deadline (Unix nanoseconds).
const HeaderTicketDeadline = headerTicketDeadline

// LineClear reports whether this process last read the line of a block
// queue empty and has seen no ticket taken since (calm's fast path).
func (s *Service) LineClear(queue string) bool {
	q, ok := s.bp.lookup(queue)
	if !ok {
		return false
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.lineClear
}

// FlushStats publishes this process's aggregated statistics now, so tests
// can check the numbers JetStream holds without waiting for the ticker.
func (s *Service) FlushStats() { s.flushStats() }

// BlockedProducers is the number of producers of this process waiting for
// room in a queue with the block strategy.
func (s *Service) BlockedProducers(queue string) int {
	q, ok := s.bp.lookup(queue)
	if !ok {
		return 0
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.waiters)
}

// FetchLevels returns the ready levels of a queue in the order a fetch
// tries them now: by effective priority under the queue's aging, if any.
func (s *Service) FetchLevels(ctx context.Context, queue string) ([]int, error) {
	levels, _, err := s.fetchLevels(ctx, queue)
	return levels, err
}

// KeepLevelSnapshots makes the queues' level snapshots (levelpull.go) last
// d instead of snapAge, so tests can rely on one being used.
func (s *Service) KeepLevelSnapshots(d time.Duration) { s.snapAge = d }

// HasLevelSnapshot reports whether the next pull of queue may use a level
// snapshot.
func (s *Service) HasLevelSnapshot(queue string) bool {
	_, ok := s.levelSnaps.Load(queue)
	return ok
}

// Limits is the store of the rate-limit entries.
func (s *Service) Limits() *kvlimits.Store { return s.limits }

// SetLimitSweep sets how often the promoter sweeps for forgotten waiters;
// call it between New and Start.
func (s *Service) SetLimitSweep(d time.Duration) { s.promoter.sweepEvery = d }

// TrustRefusalsFor makes a remembered max_depth refusal hold for d
// instead of certainFor (backpressure_certain.go), so that a test sees
// room come back only through release news; call it between New and Start.
func (s *Service) TrustRefusalsFor(d time.Duration) { s.bp.trust = d }

// KeepsCounts reports whether this process keeps the queue counts now
// (countkeeper.go) and has written them at least once.
func (s *Service) KeepsCounts() bool { return s.keeper.keeping.Load() }

// KillCountKeeper stops this process's count keeper as a kill would:
// without giving its lease up, which lapses after topology.LeaseTTL.
func (s *Service) KillCountKeeper() {
	s.keeper.abandoned.Store(true)
	s.keeper.Stop()
}

// OrphanScans is how many levels this process's count keeper has read
// looking for orphans, and how many of those reads left no message too
// young to judge (-1, -1: it keeps no count now).
func (s *Service) OrphanScans() (scans, settled int64) {
	if s.keeper == nil {
		return -1, -1
	}
	oc := s.keeper.orphans.Load()
	if oc == nil {
		return -1, -1
	}
	return oc.scans.Load(), oc.settled.Load()
}
