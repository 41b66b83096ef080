package bench

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Params are the knobs of a whole run, shared by every scenario.
type Params struct {
	// Duration of one measured run of one side (default 1s).
	Duration time.Duration `json:"duration_ns"`
	// Rounds of each case, each running both sides once (default 3).
	Rounds int `json:"rounds"`
	// Workers of the many-workers cases (default 8).
	Workers int `json:"workers"`
	// PayloadBytes is the size of a job's payload (default 200).
	PayloadBytes int `json:"payload_bytes"`
	// Keys is the number of rate limit keys of keys-10k (default 10,000);
	// Waiting the number of jobs of waiting-10k (default 10,000). Tests
	// shrink them.
	Keys    int `json:"keys"`
	Waiting int `json:"waiting"`
	// Timers is the number of timeouts of timeouts-10k (default 10,000).
	Timers int `json:"timers"`
	// CostJobs is the number of jobs of each run of the cost scenario
	// (default 5,000); DrainJobs of each run of drain-http (default
	// 20,000).
	CostJobs  int `json:"cost_jobs"`
	DrainJobs int `json:"drain_jobs"`
	// serverCPU: the NATS server runs in another process whose CPU the
	// cost scenario can read; jetgateCPU: so does the jetgate at --url
	// (set by Run).
	serverCPU, jetgateCPU bool
	// InProcessWorkers runs the drain scenarios' workers in the bench
	// process, not in processes of their own (workerproc.go).
	InProcessWorkers bool `json:"in_process_workers,omitempty"`
	// NoWarmup skips the warm-up round (tests).
	NoWarmup bool `json:"no_warmup,omitempty"`
	// backlogJobs, if set, is the number of jobs of each backlog drain of
	// the priority scenario (0: what the workers fetch in Duration, at
	// least 1,000; drainJobs). Tests shrink it.
	backlogJobs int
}

func (p Params) withDefaults() Params {
	if p.Duration <= 0 {
		p.Duration = time.Second
	}
	p.Rounds = max(p.Rounds, 1)
	if p.Workers <= 0 {
		p.Workers = 8
	}
	if p.PayloadBytes <= 0 {
		p.PayloadBytes = 200
	}
	if p.Keys <= 0 {
		p.Keys = 10_000
	}
	if p.Waiting <= 0 {
		p.Waiting = 10_000
	}
	if p.Timers <= 0 {
		p.Timers = 10_000
	}
	if p.CostJobs <= 0 {
		p.CostJobs = 5_000
	}
	if p.DrainJobs <= 0 {
		p.DrainJobs = 20_000
	}
	return p
}

// shape is the Shape of a run with p's duration and payload, and workers
// producers and workers.
func (p Params) shape(workers int) Shape {
	return Shape{Duration: p.Duration, Producers: workers, Workers: workers, PayloadBytes: p.PayloadBytes}
}

// Scenario is one thing jetgate is measured on: a few cases, each
// comparing jetgate with a baseline.
type Scenario struct {
	Name    string
	Summary string
	// Cases returns the scenario's cases for a run with p.
	Cases func(p Params) []Case
}

// Case compares jetgate with a baseline on one workload: both sides run
// in turn, in alternating order, for every round.
type Case struct {
	Name string
	// Metrics are the numbers compared, the headline first.
	Metrics []Metric
	// Baseline is usually raw JetStream; where the question is what a
	// feature costs, it is jetgate without that feature.
	Baseline, Jetgate Side
	// Target is the ratio the headline metric should reach (0: none).
	Target float64
	// MaxRounds caps the rounds of a slow case (0: Params.Rounds), and
	// NoWarmup skips its warm-up round.
	MaxRounds int
	NoWarmup  bool
}

// Side is one side of a case.
type Side struct {
	Name string
	Run  func(ctx context.Context, e *Env) (Sample, error)
}

// Metric is a number a case compares.
type Metric struct {
	Name string `json:"name"`
	// Lower is set when smaller is better (latency, CPU).
	Lower bool `json:"lower_is_better,omitempty"`
}

var (
	jobsPerSec = Metric{Name: "jobs/s"}
	p50, p99   = Metric{Name: "p50 ms", Lower: true}, Metric{Name: "p99 ms", Lower: true}
)

// Scenarios lists every scenario in the order they run.
func Scenarios() []*Scenario { return slices.Clone(registry) }

// Lookup returns the named scenarios (all of them for no name).
func Lookup(names ...string) ([]*Scenario, error) {
	if len(names) == 0 {
		return Scenarios(), nil
	}
	var out []*Scenario
	for _, n := range names {
		i := slices.IndexFunc(registry, func(s *Scenario) bool { return s.Name == n })
		if i < 0 {
			return nil, fmt.Errorf("unknown scenario %q (scenarios: %s)", n, strings.Join(Names(), ", "))
		}
		out = append(out, registry[i])
	}
	return out, nil
}

// Names are the names of every scenario.
func Names() []string {
	out := make([]string, len(registry))
	for i, s := range registry {
		out[i] = s.Name
	}
	return out
}
