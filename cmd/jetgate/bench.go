package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strings"
	"time"

	"github.com/jetgate/jetgate/bench"
	"github.com/jetgate/jetgate/cmd/jetgate/app"
)

// benchConfig is what `jetgate bench` is told.
type benchConfig struct {
	scenarios []string
	params    bench.Params
	payload   byteSize
	jsonOut   bool
	out       string
	dataDir   string
	natsURL   string
	natsMon   string
	natsPID   int
	url       string
	jgPID     int
	cpuProf   string
}

var benchFlagOrder = [][2]string{
	{"duration", "DURATION"}, {"rounds", "N"}, {"workers", "N"}, {"payload-bytes", "SIZE"},
	{"cost-jobs", "N"}, {"drain-jobs", "N"}, {"in-process-workers", ""},
	{"out", "DIR"}, {"json", ""}, {"data-dir", "DIR"}, {"nats-url", "URL"}, {"nats-monitor", "URL"}, {"nats-pid", "PID"}, {"url", "URL"}, {"jetgate-pid", "PID"},
	{"cpuprofile", "FILE"},
}

func newBenchFlags(c *benchConfig) *flag.FlagSet {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	fs.DurationVar(&c.params.Duration, "duration", time.Second, "How long each side runs in each round of each case. Longer runs steady the numbers; the whole run grows in proportion.")
	fs.IntVar(&c.params.Rounds, "rounds", 3, "Measured rounds per case, after one warm-up round. Each round runs the baseline and jetgate back to back, alternating which goes first.")
	fs.IntVar(&c.params.Workers, "workers", 8, "Worker (and producer) goroutines of the many-workers cases; roundtrip also runs with 1.")
	c.payload = 200
	fs.Var(&c.payload, "payload-bytes", "Size of each job's payload (and of each raw message), in bytes or with a unit: 200, 4KiB.")
	fs.IntVar(&c.params.CostJobs, "cost-jobs", 5000, "Jobs of each run of the cost scenario.")
	fs.IntVar(&c.params.DrainJobs, "drain-jobs", 20000, "Jobs of each run of the drain-http and drain-nats scenarios (enqueued in batches of 100, then drained).")
	fs.BoolVar(&c.params.InProcessWorkers, "in-process-workers", false, "Run the drain scenarios' workers in the bench process. By default each runs in a process of its own, as the workers users deploy do, so it does not wait for its turn in jetgate's Go scheduler.")
	fs.StringVar(&c.out, "out", "bench-results", "Directory under which each run writes <timestamp>/report.md, results.json and SVG plots.")
	fs.BoolVar(&c.jsonOut, "json", false, "Print results.json to stdout instead of the table (progress then goes to stderr).")
	fs.StringVar(&c.dataDir, "data-dir", "", "Where the embedded NATS server stores JetStream data (default: a temporary directory, removed afterwards).")
	fs.StringVar(&c.natsURL, "nats-url", "", "Run both jetgate and the raw baseline on this NATS server instead of an embedded one. The bench creates streams named BENCH_* and jetgate's own.")
	fs.StringVar(&c.natsMon, "nats-monitor", "", "Monitoring URL of the --nats-url server (its http_port, e.g. http://127.0.0.1:8222): the cost scenario reads /varz and /jsz there. Needed for cost with --nats-url.")
	fs.IntVar(&c.natsPID, "nats-pid", 0, "Process id of the --nats-url server when it runs on this machine (Linux): the cost scenario reads its CPU from /proc exactly instead of estimating it from /varz once a second.")
	fs.StringVar(&c.url, "url", "", "Send the HTTP cases to this running jetgate (e.g. http://127.0.0.1:8080) instead of the in-process one.")
	fs.IntVar(&c.jgPID, "jetgate-pid", 0, "Process id of the --url jetgate when it runs on this machine (Linux): the cost scenario reads its CPU from /proc, apart from the bench clients' and the nats-server's.")
	fs.StringVar(&c.cpuProf, "cpuprofile", "", "Write a CPU profile of the whole run to FILE (go tool pprof): the in-process jetgate, the embedded NATS server and the bench's own clients, told apart by their functions. The drain scenarios' workers run in processes of their own and are not in it unless --in-process-workers.")
	return fs
}

func parseBench(args []string, lookupEnv func(string) (string, bool)) (benchConfig, error) {
	var c benchConfig
	fs := newBenchFlags(&c)
	// Flags may come before, between or after scenario names.
	for rest := args; ; {
		if err := fs.Parse(rest); err != nil {
			return c, err
		}
		rest = fs.Args()
		for len(rest) > 0 && (rest[0] == "" || rest[0][0] != '-') {
			c.scenarios = append(c.scenarios, rest[0])
			rest = rest[1:]
		}
		if len(rest) == 0 {
			break
		}
	}
	if err := applyEnv(fs, benchEnvName, lookupEnv); err != nil {
		return c, err
	}
	if _, err := bench.Lookup(c.scenarios...); err != nil {
		return c, err
	}
	switch {
	case c.params.Duration <= 0:
		return c, fmt.Errorf("--duration must be positive, got %s", c.params.Duration)
	case c.params.Rounds < 1:
		return c, fmt.Errorf("--rounds must be at least 1, got %d", c.params.Rounds)
	case c.params.Workers < 1:
		return c, fmt.Errorf("--workers must be at least 1, got %d", c.params.Workers)
	case c.params.CostJobs < 1:
		return c, fmt.Errorf("--cost-jobs must be at least 1, got %d", c.params.CostJobs)
	case c.params.DrainJobs < 1:
		return c, fmt.Errorf("--drain-jobs must be at least 1, got %d", c.params.DrainJobs)
	case c.natsMon != "" && c.natsURL == "":
		return c, fmt.Errorf("--nats-monitor needs --nats-url (the embedded server is read in-process)")
	case c.natsURL != "" && c.natsMon == "" && (len(c.scenarios) == 0 || slices.Contains(c.scenarios, "cost")):
		return c, fmt.Errorf("the cost scenario reads the NATS server's counters: with --nats-url give --nats-monitor, or name the scenarios to run without cost")
	case c.jgPID != 0 && c.url == "":
		return c, fmt.Errorf("--jetgate-pid needs --url (the in-process jetgate's CPU is the process's)")
	case c.natsPID < 0 || c.jgPID < 0:
		return c, fmt.Errorf("--nats-pid and --jetgate-pid must be process ids, got %d and %d", c.natsPID, c.jgPID)
	case c.payload < 64 || c.payload > 1<<20:
		return c, fmt.Errorf("--payload-bytes must be 64B..1MiB, got %d", c.payload)
	}
	c.params.PayloadBytes = int(c.payload)
	return c, nil
}

func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c, err := parseBench(args, os.LookupEnv)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(stdout, benchUsage())
		return nil
	}
	if err != nil {
		fmt.Fprint(stderr, benchShortUsage)
		return err
	}
	return c.run(ctx, stdout, stderr)
}

func (c benchConfig) run(ctx context.Context, stdout, stderr io.Writer) error {
	scenarios, err := bench.Lookup(c.scenarios...)
	if err != nil {
		return err
	}
	if c.cpuProf != "" {
		f, err := os.Create(c.cpuProf)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return fmt.Errorf("cpu profile: %w", err)
		}
		defer pprof.StopCPUProfile()
	}
	// The in-process jetgate runs with the collector tuning of jetgate
	// serve (GOGC and GOMEMLIMIT still win), the baselines beside it too.
	app.TuneRuntime(app.Runtime{}, os.LookupEnv, app.MemoryCeiling)
	if c.dataDir == "" && c.natsURL == "" {
		tmp, err := os.MkdirTemp("", "jetgate-bench-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		c.dataDir = tmp
	}
	env, err := bench.Start(ctx, bench.EnvConfig{DataDir: c.dataDir, NatsURL: c.natsURL, NatsMonitor: c.natsMon, NatsPID: c.natsPID, URL: c.url, JetgatePID: c.jgPID})
	if err != nil {
		return err
	}
	progressTo := stdout
	if c.jsonOut {
		progressTo = stderr
	}
	res, runErr := bench.Run(ctx, env, scenarios, c.params, bench.NewBar(progressTo, bench.IsTerminal(progressTo)))
	if err := env.Close(); err != nil && runErr == nil {
		runErr = fmt.Errorf("stop jetgate: %w", err)
	}
	if runErr != nil {
		return runErr
	}
	return c.report(res, stdout, progressTo)
}

// report writes the run's files and shows the table, or the JSON.
func (c benchConfig) report(res *bench.Results, stdout, notes io.Writer) error {
	dir := filepath.Join(c.out, res.Started.Format("20060102-150405"))
	if _, err := bench.Write(dir, res); err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	if c.jsonOut {
		js, err := res.JSON()
		if err != nil {
			return err
		}
		_, err = stdout.Write(js)
		fmt.Fprintf(notes, "report: %s\n", filepath.Join(dir, "report.md"))
		return err
	}
	fmt.Fprintf(stdout, "\n%s\n\n%s\n", res.MachineLine(), res.Table())
	if ct := res.CostTable(); ct != "" {
		fmt.Fprintf(stdout, "Per-job cost (medians, from the NATS server's counters):\n\n%s\n", ct)
	}
	fmt.Fprintf(stdout, "report: %s\n", filepath.Join(dir, "report.md"))
	return nil
}

const benchIntro = `Measures jetgate against raw NATS JetStream on the same machine, in one
process and one run, and reports ratios jetgate/baseline: absolute rates
move with the machine and its load, ratios measured side by side much
less. It starts its own jetgate with an embedded NATS server (or uses
--nats-url), runs the scenarios named (all of them by default), shows a
progress bar per scenario, prints a table and writes
<out>/<timestamp>/report.md, results.json and SVG plots.

Each case runs a warm-up round and then --rounds rounds; in each round
the baseline and jetgate run for --duration each, back to back, in
alternating order. The table shows each side's median [min–max] and the
median ratio. Slow numbers never fail the command; errors (a lost job, a
failed request) do. The default run takes about seven minutes.

Every flag can also be set by the environment variable shown next to it
(JETGATE_BENCH_<FLAG>, apart from the server's JETGATE_<FLAG>).`

const benchExamples = `Examples:
  # Everything, default sizes:
  jetgate bench

  # Only the round trips and latency, longer runs, five rounds:
  jetgate bench --duration 3s --rounds 5 roundtrip latency

  # Per-job cost with jetgate and nats-server told apart (nats-server -js -m 8222):
  jetgate bench --nats-url nats://127.0.0.1:4222 --nats-monitor http://127.0.0.1:8222 cost

  # Machine-readable results for a script:
  jetgate bench --json enqueue > results.json
`

const benchShortUsage = `Usage:
  jetgate bench [flags] [scenario...]

Run "jetgate bench --help" for the scenarios and every flag.
`

// benchUsage renders the bench help from the scenarios and flag
// definitions.
func benchUsage() string {
	var c benchConfig
	fs := newBenchFlags(&c)
	var b strings.Builder
	fmt.Fprintf(&b, "Usage:\n  jetgate bench [flags] [scenario...]\n\n%s\n\nScenarios:\n", benchIntro)
	for _, s := range bench.Scenarios() {
		fmt.Fprintf(&b, "  %s\n%s", s.Name, wrap(s.Summary, "      ", 78))
	}
	b.WriteString("\nFlags:\n")
	for _, nf := range benchFlagOrder {
		f := fs.Lookup(nf[0])
		fmt.Fprintf(&b, "  --%s (%s", strings.TrimSpace(f.Name+" "+nf[1]), benchEnvName(f.Name))
		if f.DefValue != "" && f.DefValue != "false" {
			fmt.Fprintf(&b, ", default %s", f.DefValue)
		}
		fmt.Fprintf(&b, ")\n%s", wrap(f.Usage, "      ", 78))
	}
	fmt.Fprintf(&b, "\n%s", benchExamples)
	return b.String()
}
