package bench

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// Shape is what one workload run does: producers goroutines enqueue and
// workers goroutines fetch and ack, all at once, either Jobs jobs or for
// Duration, whichever is set (Jobs wins).
type Shape struct {
	Jobs      int
	Duration  time.Duration
	Producers int
	Workers   int
	// PayloadBytes is the size of a raw message and, roughly, of a job's
	// enqueue request (default 200).
	PayloadBytes int
	// MaxBacklog bounds the jobs enqueued but not yet acked: producers
	// wait while it is reached, so a time-boxed run drains quickly and no
	// side runs against a deep backlog (0: 64 per worker, at least 1000).
	MaxBacklog int
	// Rate, when set, paces producers to this many enqueues per second in
	// total (for latency below saturation).
	Rate float64
	// Timing records every job's enqueue-to-start latency.
	Timing bool
}

func (sh Shape) payloadBytes() int { return max(sh.PayloadBytes, 64) }

func (sh Shape) backlog() int64 {
	if sh.MaxBacklog > 0 {
		return int64(sh.MaxBacklog)
	}
	return int64(max(64*sh.Workers, 1000))
}

// source hands out job indexes to producers until the job count or the
// deadline is reached, holding them back while the backlog is full and
// pacing them at sh.Rate.
type source struct {
	sh       Shape
	led      *ledger
	start    time.Time
	deadline time.Time
	next     atomic.Int64
	claimed  atomic.Int64 // indexes handed out
	done     atomic.Bool  // every producer returned
}

func newSource(sh Shape, led *ledger) *source {
	s := &source{sh: sh, led: led, start: time.Now()}
	if sh.Jobs <= 0 {
		s.deadline = s.start.Add(sh.Duration)
	}
	return s
}

func (s *source) expired() bool { return !s.deadline.IsZero() && !time.Now().Before(s.deadline) }

// claim returns the next job index, or false when producers must stop.
func (s *source) claim(ctx context.Context) (int, bool) {
	for s.next.Load()-s.led.acked.Load() >= s.sh.backlog() {
		if s.expired() || sleep(ctx, 100*time.Microsecond) != nil {
			return 0, false
		}
	}
	i := s.next.Add(1) - 1
	if (s.sh.Jobs > 0 && i >= int64(s.sh.Jobs)) || s.expired() || ctx.Err() != nil {
		return 0, false
	}
	if s.sh.Rate > 0 {
		at := s.start.Add(time.Duration(float64(i) / s.sh.Rate * float64(time.Second)))
		if d := time.Until(at); d > 0 && (sleep(ctx, d) != nil || s.expired()) {
			return 0, false
		}
	}
	s.claimed.Add(1)
	return int(i), true
}

// finished reports whether producers are done and every job they
// enqueued was acked.
func (s *source) finished() bool {
	return s.done.Load() && s.led.acked.Load() >= s.claimed.Load()
}

// pipeline is one workload: produce enqueues job i; worker returns the
// function worker w calls in a loop, which fetches, acks and records jobs
// in the ledger and returns how many it completed.
type pipeline struct {
	produce func(ctx context.Context, i int) error
	worker  func(w int) func(ctx context.Context, led *ledger) (int, error)
	// ids: the ledger checks job ids (jetgate) as well as indexes.
	ids bool
}

// emptyPerJob is the Sample metric of empty fetches per job completed.
const emptyPerJob = "empty fetches/job"

// tick is the resolution of a run's throughput timeline.
const tick = 100 * time.Millisecond

// run runs p with sh and returns the jobs completed per second, from the
// first enqueue to the last ack; it fails unless every job enqueued was
// completed exactly once.
func (p pipeline) run(ctx context.Context, sh Shape) (Sample, error) {
	led := newLedger(sh.Timing)
	src := newSource(sh, led)
	c, wctx := newCrew(ctx)
	p.spawnProducers(wctx, c, sh, src, led)
	p.spawnWorkers(wctx, c, sh, src, led)
	tl := startTimeline(&led.acked)
	err := c.wait()
	elapsed := time.Since(src.start)
	timeline := tl.stop()
	if err != nil {
		return Sample{}, err
	}
	n := int(src.claimed.Load())
	if err := led.verify(n, int(min(src.next.Load(), int64(maxSegs*segSize))), p.ids); err != nil {
		return Sample{}, err
	}
	s := Sample{
		Ops:      int64(n),
		Elapsed:  elapsed,
		Timeline: timeline,
		Metrics: map[string]float64{
			"jobs/s": float64(n) / elapsed.Seconds(),
			// How often a worker found nothing: a high share means the
			// producers, not the fetch-and-ack path, bound the run.
			emptyPerJob: float64(led.empty.Load()) / float64(max(n, 1)),
		},
	}
	if sh.Timing {
		s.setLatencies(led.lat)
	}
	return s, nil
}

// spawnProducers starts the producers, and a goroutine that marks the
// source done once they all returned.
func (p pipeline) spawnProducers(ctx context.Context, c *crew, sh Shape, src *source, led *ledger) {
	var producers sync.WaitGroup
	for range max(sh.Producers, 1) {
		producers.Add(1)
		c.spawn(func() error {
			defer producers.Done()
			for i, ok := src.claim(ctx); ok; i, ok = src.claim(ctx) {
				if err := led.enqueuing(i); err != nil {
					return err
				}
				if err := p.produce(ctx, i); err != nil {
					return err
				}
			}
			return nil
		})
	}
	c.spawn(func() error { producers.Wait(); src.done.Store(true); return nil })
}

// spawnWorkers starts the workers, which run until every job enqueued
// was acked.
func (p pipeline) spawnWorkers(ctx context.Context, c *crew, sh Shape, src *source, led *ledger) {
	for w := range max(sh.Workers, 1) {
		step := p.worker(w)
		c.spawn(func() error {
			for !src.finished() {
				n, err := step(ctx, led)
				if err != nil {
					return err
				}
				led.fetched(n)
				if n == 0 {
					if err := pause(ctx); err != nil {
						return err
					}
				}
			}
			return nil
		})
	}
}

// timeline samples a counter every tick into per-second rates.
type timeline struct {
	stopc chan struct{}
	done  chan []float64
}

func startTimeline(counter *atomic.Int64) *timeline {
	t := &timeline{stopc: make(chan struct{}), done: make(chan []float64, 1)}
	go func() {
		tk := time.NewTicker(tick)
		defer tk.Stop()
		var out []float64
		last := counter.Load()
		for {
			select {
			case <-tk.C:
				n := counter.Load()
				out = append(out, float64(n-last)/tick.Seconds())
				last = n
			case <-t.stopc:
				t.done <- out
				return
			}
		}
	}()
	return t
}

func (t *timeline) stop() []float64 {
	close(t.stopc)
	return <-t.done
}
