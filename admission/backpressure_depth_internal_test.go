package admission

import (
	"testing"
	"time"

	"github.com/jetgate/jetgate/admission/ojs"
)

// BP-005, ojs-backpressure.md 7.2 (X-OJS-Queue-Depth is the current
// depth): the depth reported never exceeds what the depth stream can
// hold, max_depth units, plus the overdraft. This process's count runs
// ahead of the truth when a reading already holds a unit that an
// admission then adds again (seen under jetgate load: depth 5126 of 5000).
func TestBackpressureReportedDepthWithinStream_BP005(t *testing.T) {
	t.Parallel()
	_, s := newInternalService(t, time.Minute)
	cfg := ojs.Backpressure{MaxDepth: 5000, Strategy: ojs.StrategyReject}
	q := s.bp.queue("q")
	q.mu.Lock()
	q.depth, q.over, q.seenAt = 5126, 3, time.Now() // a fresh count, ahead of the stream
	q.mu.Unlock()
	p := s.observe(t.Context(), q, cfg.WithDefaults(), false)
	if p.Depth != 5003 || p.MaxDepth != 5000 || p.Ratio != 1 {
		t.Fatalf("pressure %+v, want depth 5000 units + 3 overdraft of 5000", p)
	}
}
