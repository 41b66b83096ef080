package main

import (
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jetgate/jetgate/bench"
)

func TestBenchHelpListsScenariosAndFlags(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"bench", "--help"}, {"help", "bench"}} {
		stdout, stderr, err := runCmd(t, args...)
		if err != nil || stderr != "" {
			t.Fatalf("%v: err = %v, stderr = %q", args, err, stderr)
		}
		for _, name := range bench.Names() {
			if !strings.Contains(stdout, "\n  "+name+"\n") {
				t.Errorf("%v: help lacks scenario %q", args, name)
			}
		}
		var c benchConfig
		newBenchFlags(&c).VisitAll(func(f *flag.Flag) {
			for _, want := range []string{"--" + f.Name, benchEnvName(f.Name)} {
				if !strings.Contains(stdout, want) {
					t.Errorf("%v: help lacks %q", args, want)
				}
			}
		})
	}
	if len(benchFlagOrder) != countFlags(newBenchFlags(&benchConfig{})) {
		t.Errorf("benchFlagOrder lists %d flags, the flag set has %d", len(benchFlagOrder), countFlags(newBenchFlags(&benchConfig{})))
	}
}

func countFlags(fs *flag.FlagSet) int {
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	return n
}

func TestParseBench(t *testing.T) {
	t.Parallel()
	c, err := parseBench([]string{"--rounds", "5", "throttle", "roundtrip"}, lookup(map[string]string{
		"JETGATE_BENCH_ROUNDS": "7", "JETGATE_BENCH_DURATION": "2s", "JETGATE_BENCH_PAYLOAD_BYTES": "1KiB",
		"JETGATE_NATS_URL": "nats://production:4222",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if c.params.Rounds != 5 || c.params.Duration != 2*time.Second || c.params.PayloadBytes != 1024 || c.params.Workers != 8 {
		t.Errorf("params = %+v", c.params)
	}
	if c.natsURL != "" {
		t.Errorf("bench took the server's JETGATE_NATS_URL: %q", c.natsURL)
	}
	if strings.Join(c.scenarios, ",") != "throttle,roundtrip" {
		t.Errorf("scenarios = %v", c.scenarios)
	}
	// Flags after and between scenario names count too.
	c, err = parseBench([]string{"throttle", "--rounds", "2", "timeouts-10k", "--workers=3"}, lookup(nil))
	if err != nil || c.params.Rounds != 2 || c.params.Workers != 3 || strings.Join(c.scenarios, ",") != "throttle,timeouts-10k" {
		t.Errorf("interspersed flags: %v %+v %v", err, c.params, c.scenarios)
	}
	for _, tc := range []struct {
		args    []string
		wantErr string
	}{
		{[]string{"nope"}, `unknown scenario "nope"`},
		{[]string{"--duration", "0s"}, "--duration must be positive"},
		{[]string{"--rounds", "0"}, "--rounds must be at least 1"},
		{[]string{"--workers", "0"}, "--workers must be at least 1"},
		{[]string{"--payload-bytes", "2"}, "--payload-bytes must be"},
		{[]string{"--cost-jobs", "0"}, "--cost-jobs must be at least 1"},
		{[]string{"--drain-jobs", "0", "drain-http"}, "--drain-jobs must be at least 1"},
		{[]string{"--nats-monitor", "http://127.0.0.1:8222", "cost"}, "--nats-monitor needs --nats-url"},
		// The cost scenario reads the server's counters: on another
		// server it needs its monitoring URL, whether named or implied.
		{[]string{"--nats-url", "nats://127.0.0.1:4222"}, "give --nats-monitor"},
		{[]string{"--nats-url", "nats://127.0.0.1:4222", "roundtrip", "cost"}, "give --nats-monitor"},
		{[]string{"--nats-url", "nats://127.0.0.1:4222", "--nats-monitor", "http://x", "--nats-pid", "-1", "cost"}, "--nats-pid and --jetgate-pid must be"},
		{[]string{"--jetgate-pid", "7", "cost"}, "--jetgate-pid needs --url"},
	} {
		if _, err := parseBench(tc.args, lookup(nil)); err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("%v: err = %v, want %q", tc.args, err, tc.wantErr)
		}
	}
	c, err = parseBench([]string{"--nats-url", "nats://127.0.0.1:4222", "--nats-monitor", "http://127.0.0.1:8222", "--nats-pid", "42",
		"--cost-jobs", "300", "--drain-jobs=400", "cost", "drain-http"}, lookup(nil))
	if err != nil || c.natsMon != "http://127.0.0.1:8222" || c.natsPID != 42 || c.params.CostJobs != 300 || c.params.DrainJobs != 400 {
		t.Errorf("cost flags: %v %+v %q %d", err, c.params, c.natsMon, c.natsPID)
	}
	if _, err := parseBench([]string{"--nats-url", "nats://127.0.0.1:4222", "roundtrip"}, lookup(nil)); err != nil {
		t.Errorf("--nats-url without cost needs no monitor: %v", err)
	}
	_, stderr, err := runCmd(t, "bench", "nope")
	if err == nil || !strings.Contains(stderr, "Usage:") {
		t.Errorf("bench nope: err = %v, stderr = %q", err, stderr)
	}
}

// TestBenchRun runs one scenario for real, briefly, and checks the JSON
// on stdout and the files written.
func TestBenchRun(t *testing.T) {
	out := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var stdout, stderr strings.Builder
	err := run(ctx, []string{"bench", "--duration", "50ms", "--rounds", "1", "--workers", "2", "--json", "--out", out, "enqueue"}, &stdout, &stderr)
	if err != nil {
		t.Fatalf("bench: %v\n%s", err, stderr.String())
	}
	var res bench.Results
	if err := json.Unmarshal([]byte(stdout.String()), &res); err != nil {
		t.Fatalf("stdout is not results.json: %v\n%s", err, stdout.String())
	}
	if len(res.Scenarios) != 1 || res.Scenarios[0].Name != "enqueue" || len(res.Scenarios[0].Cases) == 0 {
		t.Fatalf("results: %+v", res.Scenarios)
	}
	if !strings.Contains(stderr.String(), "enqueue: done") || !strings.Contains(stderr.String(), "report.md") {
		t.Errorf("stderr lacks progress or the report path:\n%s", stderr.String())
	}
	dirs, err := os.ReadDir(out)
	if err != nil || len(dirs) != 1 {
		t.Fatalf("%s: %v, %v", out, dirs, err)
	}
	for _, f := range []string{"report.md", "results.json"} {
		if _, err := os.Stat(filepath.Join(out, dirs[0].Name(), f)); err != nil {
			t.Error(err)
		}
	}
}
