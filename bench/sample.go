package bench

import (
	"math"
	"slices"
	"time"
)

// Sample is what one run of one side measured.
type Sample struct {
	// Ops is the number of operations (jobs, enqueues, starts) done.
	Ops int64 `json:"ops"`
	// Elapsed is the run's measured time.
	Elapsed time.Duration `json:"elapsed_ns"`
	// Metrics holds the run's numbers by metric name (see Metric).
	Metrics map[string]float64 `json:"metrics"`
	// Timeline is the throughput over the run, one rate per 100 ms.
	Timeline []float64 `json:"timeline,omitempty"`
	// Latencies (enqueue to start) and Spacing (gaps between starts), in
	// ms, for the plots; not written to results.json.
	Latencies []float64 `json:"-"`
	Spacing   []float64 `json:"-"`
}

// setLatencies records ds as the sample's latencies and their p50 and
// p99 in ms.
func (s *Sample) setLatencies(ds []time.Duration) {
	s.Latencies = make([]float64, len(ds))
	for i, d := range ds {
		s.Latencies[i] = float64(d) / float64(time.Millisecond)
	}
	slices.Sort(s.Latencies)
	if s.Metrics == nil {
		s.Metrics = map[string]float64{}
	}
	s.Metrics["p50 ms"] = quantile(s.Latencies, 0.50)
	s.Metrics["p99 ms"] = quantile(s.Latencies, 0.99)
}

// quantile is the q quantile of sorted xs (nearest rank; 0 when empty).
func quantile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	k := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[min(max(k, 0), len(sorted)-1)]
}
