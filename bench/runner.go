package bench

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/jetgate/jetgate/cmd/jetgate/app"
)

// Results is a whole run: what it ran on, with which knobs, and every
// scenario's numbers. It is what results.json holds.
type Results struct {
	Started time.Time     `json:"started"`
	Elapsed time.Duration `json:"elapsed_ns"`
	Machine Machine       `json:"machine"`
	Params  Params        `json:"params"`
	// RemoteHTTP is the running jetgate the HTTP cases went to, when it
	// was not the in-process one (--url).
	RemoteHTTP string           `json:"remote_http,omitempty"`
	Scenarios  []ScenarioResult `json:"scenarios"`
}

// Machine describes where a run ran.
type Machine struct {
	Host      string `json:"host"`
	OS        string `json:"os"`
	Arch      string `json:"arch"`
	CPUs      int    `json:"cpus"`
	CPU       string `json:"cpu,omitempty"`
	GoVersion string `json:"go_version"`
	// GC is the collector's target and soft memory limit the run had
	// (jetgate bench applies jetgate serve's defaults, app.TuneRuntime).
	GC string `json:"gc"`
}

// ScenarioResult is one scenario's cases.
type ScenarioResult struct {
	Name    string        `json:"name"`
	Summary string        `json:"summary"`
	Elapsed time.Duration `json:"elapsed_ns"`
	Cases   []CaseResult  `json:"cases"`
}

// CaseResult is one case: its metrics summarised over the rounds, and
// the rounds themselves.
type CaseResult struct {
	Name     string         `json:"name"`
	Baseline string         `json:"baseline"`
	Jetgate  string         `json:"jetgate"`
	Target   float64        `json:"target,omitempty"`
	Metrics  []MetricResult `json:"metrics"`
	Rounds   []Round        `json:"rounds"`
}

// Round is one run of each side.
type Round struct {
	Baseline Sample `json:"baseline"`
	Jetgate  Sample `json:"jetgate"`
	// JetgateFirst says which side ran first this round.
	JetgateFirst bool `json:"jetgate_first"`
}

// MetricResult is one metric over the rounds: median and range of each
// side, and of the ratio jetgate/baseline of each round (the two sides of
// a round ran back to back, so their ratio cancels most load that drifts
// over the run).
type MetricResult struct {
	Metric
	Baseline Stat `json:"baseline"`
	Jetgate  Stat `json:"jetgate"`
	// Ratio is jetgate/baseline; absent when a baseline round was 0.
	Ratio *Stat `json:"ratio,omitempty"`
}

// Stat is the median and range of a number over rounds.
type Stat struct {
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
}

func statOf(xs []float64) Stat {
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n == 0 {
		return Stat{}
	}
	med := s[n/2]
	if n%2 == 0 {
		med = (s[n/2-1] + s[n/2]) / 2
	}
	return Stat{Median: med, Min: s[0], Max: s[n-1]}
}

// Progress hears about a run as it goes; the command draws it.
type Progress interface {
	// Begin starts a scenario of runs runs, each about d long.
	Begin(scenario string, runs int, d time.Duration)
	// Step says a run started (label: case, side and round).
	Step(label string)
	// End closes the scenario.
	End(err error)
}

// Run runs the scenarios against e, one after the other.
func Run(ctx context.Context, e *Env, scenarios []*Scenario, p Params, prog Progress) (*Results, error) {
	p = p.withDefaults()
	p.serverCPU = e.mon != nil && !e.mon.inProcess()
	p.jetgateCPU = e.jetgatePID > 0
	res := &Results{Started: time.Now().UTC(), Machine: machine(), Params: p}
	if e.httpURL != e.srv.URL() {
		res.RemoteHTTP = e.httpURL
	}
	for _, sc := range scenarios {
		sr, err := runScenario(ctx, e, sc, p, prog)
		if err != nil {
			return res, fmt.Errorf("scenario %s: %w", sc.Name, err)
		}
		res.Scenarios = append(res.Scenarios, sr)
	}
	res.Elapsed = time.Since(res.Started)
	return res, nil
}

func runScenario(ctx context.Context, e *Env, sc *Scenario, p Params, prog Progress) (ScenarioResult, error) {
	start := time.Now()
	cases := sc.Cases(p)
	runs := 0
	for _, c := range cases {
		runs += 2 * (c.warmups(p) + c.rounds(p))
	}
	prog.Begin(sc.Name, runs, p.Duration)
	sr := ScenarioResult{Name: sc.Name, Summary: sc.Summary}
	for _, c := range cases {
		cr, err := runCase(ctx, e, c, p, c.warmups(p), prog)
		if err != nil {
			prog.End(err)
			return sr, fmt.Errorf("%s: %w", c.Name, err)
		}
		sr.Cases = append(sr.Cases, cr)
	}
	sr.Elapsed = time.Since(start)
	prog.End(nil)
	return sr, nil
}

func (c Case) warmups(p Params) int {
	if p.NoWarmup || c.NoWarmup {
		return 0
	}
	return 1
}

func (c Case) rounds(p Params) int {
	if c.MaxRounds > 0 {
		return min(c.MaxRounds, p.Rounds)
	}
	return p.Rounds
}

// runCase runs warm warm-up rounds (discarded), then the rounds, the
// baseline first in even rounds and jetgate first in odd ones.
func runCase(ctx context.Context, e *Env, c Case, p Params, warm int, prog Progress) (CaseResult, error) {
	cr := CaseResult{Name: c.Name, Baseline: c.Baseline.Name, Jetgate: c.Jetgate.Name, Target: c.Target}
	total := warm + c.rounds(p)
	for r := range total {
		label := fmt.Sprintf("round %d/%d", r-warm+1, c.rounds(p))
		if r < warm {
			label = "warm-up"
		}
		round := Round{JetgateFirst: r%2 == 1}
		sides := []struct {
			side Side
			out  *Sample
		}{{c.Baseline, &round.Baseline}, {c.Jetgate, &round.Jetgate}}
		if round.JetgateFirst {
			slices.Reverse(sides)
		}
		for _, s := range sides {
			if err := ctx.Err(); err != nil {
				return cr, err
			}
			prog.Step(fmt.Sprintf("%s · %s · %s", c.Name, s.side.Name, label))
			got, err := runSide(ctx, e, s.side, p)
			if err != nil {
				return cr, fmt.Errorf("%s: %w", s.side.Name, err)
			}
			*s.out = got
		}
		if r >= warm {
			cr.Rounds = append(cr.Rounds, round)
		}
	}
	cr.Metrics = summarise(c.Metrics, cr.Rounds)
	return cr, nil
}

func summarise(metrics []Metric, rounds []Round) []MetricResult {
	out := make([]MetricResult, 0, len(metrics))
	for _, m := range metrics {
		var base, jg, ratio []float64
		for _, r := range rounds {
			b, j := r.Baseline.Metrics[m.Name], r.Jetgate.Metrics[m.Name]
			base, jg = append(base, b), append(jg, j)
			if b != 0 {
				ratio = append(ratio, j/b)
			}
		}
		mr := MetricResult{Metric: m, Baseline: statOf(base), Jetgate: statOf(jg)}
		if len(ratio) == len(rounds) && len(ratio) > 0 {
			st := statOf(ratio)
			mr.Ratio = &st
		}
		out = append(out, mr)
	}
	return out
}

func machine() Machine {
	host, _ := os.Hostname()
	return Machine{
		Host:      host,
		OS:        runtime.GOOS,
		Arch:      runtime.GOARCH,
		CPUs:      runtime.NumCPU(),
		CPU:       cpuModel(),
		GoVersion: runtime.Version(),
		GC:        gcLine(),
	}
}

// gcLine names the collector's target and memory limit the run has, e.g.
// "GOGC=400, no memory limit".
func gcLine() string {
	pct, lim := app.GC()
	gc := "GOGC=off"
	if pct >= 0 {
		gc = fmt.Sprintf("GOGC=%d", pct)
	}
	if lim > 0 {
		return fmt.Sprintf("%s, memory limit %d MiB", gc, lim>>20)
	}
	return gc + ", no memory limit"
}

// cpuModel reads the CPU model from /proc/cpuinfo where there is one.
func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return ""
	}
	for line := range strings.Lines(string(b)) {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// runSide runs one side with a generous deadline: a side that hangs is an
// error, a slow one never is.
func runSide(ctx context.Context, e *Env, s Side, p Params) (Sample, error) {
	ctx, cancel := context.WithTimeout(ctx, max(2*time.Minute, 30*p.Duration))
	defer cancel()
	return s.Run(ctx, e)
}
