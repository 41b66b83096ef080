package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// tiny is a run small enough for the test suite: every scenario, one
// round, no warm-up, short runs and few keys, waiting jobs and backlogs
// (256 backlog jobs: one on each of the priority scenario's 256 levels).
var tiny = Params{Duration: 60 * time.Millisecond, Rounds: 1, Workers: 2, PayloadBytes: 128, Keys: 20, Waiting: 50, Timers: 50, CostJobs: 40, DrainJobs: 60, NoWarmup: true, backlogJobs: 256}

// TestEveryScenario runs every registered scenario at tiny sizes so the
// harness never rots: each case must produce a round in which both sides
// did work, and the files of a report must be written and parse. It
// asserts nothing about speed, and sets no deadline of its own: each side
// of a case has its own generous bound (runSide), so a loaded machine
// slows the test down without failing it.
func TestEveryScenario(t *testing.T) {
	e := startEnv(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var log bytes.Buffer
	res, err := Run(ctx, e, Scenarios(), tiny, NewBar(&log, false))
	if err != nil {
		t.Fatalf("run: %v\n%s", err, log.String())
	}
	if len(res.Scenarios) != len(registry) {
		t.Fatalf("%d scenarios ran, want %d", len(res.Scenarios), len(registry))
	}
	for _, s := range res.Scenarios {
		if len(s.Cases) == 0 {
			t.Errorf("%s: no case", s.Name)
		}
		for _, c := range s.Cases {
			checkCase(t, s.Name, c)
		}
		if !strings.Contains(log.String(), s.Name+": done") {
			t.Errorf("progress lacks %q:\n%s", s.Name+": done", log.String())
		}
	}

	dir := filepath.Join(t.TempDir(), "report")
	files, err := Write(dir, res)
	if err != nil {
		t.Fatal(err)
	}
	checkReport(t, dir, files, res)
}

func checkCase(t *testing.T, scenario string, c CaseResult) {
	t.Helper()
	if len(c.Rounds) != 1 {
		t.Errorf("%s/%s: %d rounds, want 1", scenario, c.Name, len(c.Rounds))
		return
	}
	r := c.Rounds[0]
	for side, s := range map[string]Sample{c.Baseline: r.Baseline, c.Jetgate: r.Jetgate} {
		if s.Ops <= 0 {
			t.Errorf("%s/%s/%s: no operation done", scenario, c.Name, side)
		}
		for _, m := range []string{"jobs/s", "starts/s", "p50 ms", "p50 µs"} {
			if v, ok := s.Metrics[m]; ok && v <= 0 {
				t.Errorf("%s/%s/%s: %s = %v", scenario, c.Name, side, m, v)
			}
		}
	}
	if len(c.Metrics) == 0 {
		t.Errorf("%s/%s: no metric", scenario, c.Name)
	}
	for _, m := range c.Metrics {
		if _, ok := r.Jetgate.Metrics[m.Name]; !ok {
			t.Errorf("%s/%s: jetgate side lacks metric %q", scenario, c.Name, m.Name)
		}
		if _, ok := r.Baseline.Metrics[m.Name]; !ok {
			t.Errorf("%s/%s: baseline side lacks metric %q", scenario, c.Name, m.Name)
		}
	}
	if h := c.Metrics[0]; h.Name == "jobs/s" && (h.Ratio == nil || h.Ratio.Median <= 0) {
		t.Errorf("%s/%s: no ratio for %s", scenario, c.Name, h.Name)
	}
}

func checkReport(t *testing.T, dir string, files []string, res *Results) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(dir, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	var back Results
	if err := json.Unmarshal(raw, &back); err != nil {
		t.Fatalf("results.json: %v", err)
	}
	if len(back.Scenarios) != len(res.Scenarios) || back.Machine.CPUs == 0 {
		t.Errorf("results.json: %d scenarios, %d CPUs", len(back.Scenarios), back.Machine.CPUs)
	}
	md, err := os.ReadFile(filepath.Join(dir, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range res.Scenarios {
		if !bytes.Contains(md, []byte("| "+s.Name+" |")) {
			t.Errorf("report.md lacks a row of %s", s.Name)
		}
	}
	var kinds = map[string]int{}
	for _, f := range files {
		if !strings.HasSuffix(f, ".svg") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil || !bytes.HasPrefix(b, []byte("<svg ")) || !bytes.HasSuffix(b, []byte("</svg>\n")) {
			t.Errorf("%s: not an SVG (%v)", f, err)
		}
		if !bytes.Contains(md, []byte(filepath.Base(f))) {
			t.Errorf("report.md does not show %s", filepath.Base(f))
		}
		for _, k := range []string{"-throughput.svg", "-latency-cdf.svg", "-spacing.svg"} {
			if strings.HasSuffix(f, k) {
				kinds[k]++
			}
		}
	}
	for _, k := range []string{"-throughput.svg", "-latency-cdf.svg", "-spacing.svg"} {
		if kinds[k] == 0 {
			t.Errorf("no *%s plot written", k)
		}
	}
}

func TestLookup(t *testing.T) {
	got, err := Lookup("throttle", "roundtrip")
	if err != nil || len(got) != 2 || got[0].Name != "throttle" || got[1].Name != "roundtrip" {
		t.Fatalf("Lookup = %v, %v", got, err)
	}
	if _, err := Lookup("nope"); err == nil || !strings.Contains(err.Error(), "roundtrip") {
		t.Errorf("Lookup(nope) = %v, want an error listing the scenarios", err)
	}
	if all, _ := Lookup(); len(all) != len(registry) {
		t.Errorf("Lookup() = %d scenarios, want all %d", len(all), len(registry))
	}
}

func TestStat(t *testing.T) {
	for _, tc := range []struct {
		in   []float64
		want Stat
	}{
		{[]float64{3, 1, 2}, Stat{Median: 2, Min: 1, Max: 3}},
		{[]float64{4, 1, 2, 3}, Stat{Median: 2.5, Min: 1, Max: 4}},
		{nil, Stat{}},
	} {
		if got := statOf(tc.in); got != tc.want {
			t.Errorf("statOf(%v) = %+v, want %+v", tc.in, got, tc.want)
		}
	}
}

// TestBarLive checks the live bar redraws in place and stops its
// goroutine.
func TestBarLive(t *testing.T) {
	var buf syncBuffer
	b := NewBar(&buf, true)
	b.Begin("roundtrip", 2, time.Millisecond)
	b.Step("a")
	b.Step("b")
	b.End(nil)
	out := buf.String()
	if !strings.Contains(out, "\r") || !strings.Contains(out, "roundtrip") || !strings.HasSuffix(out, "\n") {
		t.Errorf("live bar output %q", out)
	}
}
