package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/jetgate/jetgate/bench"
)

const loadIntro = `Overloads jetgate's HTTP API on purpose and checks it degrades as documented
(issue 20): producers enqueue single jobs open loop at --factor times the
throughput the same workload sustains (measured first, closed loop, for
--calibrate; or at --rate), into a queue bounded at --max-depth that
rejects when full, while an SDK-style worker with --handlers handlers drains
it. It passes when no request fails other than 429 QUEUE_FULL refusals,
every kind of request's p99 latency (from its intended send time) stays
under --p99-bound, and resident memory grows by at most --max-growth after
the first tenth of the run. Loopback only: it drives an in-process jetgate,
or the one at --url on this machine.`

type loadConfig struct {
	cfg     bench.LoadConfig
	growth  byteSize
	url     string
	dataDir string
	jsonOut bool
}

var loadFlagOrder = [][2]string{
	{"rate", "N"}, {"factor", "X"}, {"calibrate", "DURATION"}, {"duration", "DURATION"}, {"handlers", "N"}, {"work", "DURATION"},
	{"senders", "N"}, {"max-depth", "N"}, {"p99-bound", "DURATION"}, {"max-growth", "SIZE"},
	{"url", "URL"}, {"jetgate-pid", "PID"}, {"data-dir", "DIR"}, {"json", ""},
}

func newLoadFlags(c *loadConfig) *flag.FlagSet {
	fs := flag.NewFlagSet("load", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	fs.Float64Var(&c.cfg.Rate, "rate", 0, "Enqueue arrivals per second. 0: --factor times the sustained throughput measured first.")
	fs.Float64Var(&c.cfg.Factor, "factor", 2, "Multiple of the sustained throughput offered when --rate is 0.")
	fs.DurationVar(&c.cfg.Calibrate, "calibrate", 10*time.Second, "How long the closed-loop measurement of the sustained throughput runs.")
	fs.DurationVar(&c.cfg.Duration, "duration", 60*time.Second, "How long the open-loop overload runs.")
	fs.IntVar(&c.cfg.Handlers, "handlers", 100, "Handlers of the SDK-style worker (fetch for free slots, one ack per job).")
	fs.DurationVar(&c.cfg.Work, "work", 0, "How long each handler works on a job before acking it (0: a no-op handler).")
	fs.IntVar(&c.cfg.Senders, "senders", 256, "Enqueue requests in flight at most; an arrival that finds none free waits, and its wait counts.")
	fs.IntVar(&c.cfg.MaxDepth, "max-depth", 5000, "Bound of the loaded queue (strategy reject).")
	fs.DurationVar(&c.cfg.P99Bound, "p99-bound", 500*time.Millisecond, "Pass bound of the p99 latency of enqueue, fetch and ack requests.")
	c.growth = 64 << 20
	fs.Var(&c.growth, "max-growth", "Pass bound of resident memory growth after the first tenth of the run.")
	fs.StringVar(&c.url, "url", "", "Load this running jetgate (e.g. http://127.0.0.1:8080) instead of an in-process one.")
	fs.IntVar(&c.cfg.JetgatePID, "jetgate-pid", 0, "Process id of the --url jetgate: its resident memory is read from /proc (otherwise this process's).")
	fs.StringVar(&c.dataDir, "data-dir", "", "Where the in-process jetgate's embedded NATS stores data (default: a temporary directory, removed afterwards).")
	fs.BoolVar(&c.jsonOut, "json", false, "Print the report as JSON.")
	return fs
}

func parseLoad(args []string, lookupEnv func(string) (string, bool)) (loadConfig, error) {
	var c loadConfig
	fs := newLoadFlags(&c)
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if err := applyEnv(fs, loadEnvName, lookupEnv); err != nil {
		return c, err
	}
	switch {
	case c.cfg.Rate < 0:
		return c, fmt.Errorf("--rate must not be negative, got %g", c.cfg.Rate)
	case c.cfg.Factor <= 0:
		return c, fmt.Errorf("--factor must be positive, got %g", c.cfg.Factor)
	case c.cfg.Duration <= 0 || c.cfg.Calibrate <= 0:
		return c, fmt.Errorf("--duration and --calibrate must be positive")
	case c.cfg.Handlers < 1 || c.cfg.Senders < 1 || c.cfg.MaxDepth < 1:
		return c, fmt.Errorf("--handlers, --senders and --max-depth must be at least 1")
	case c.cfg.JetgatePID != 0 && c.url == "":
		return c, fmt.Errorf("--jetgate-pid needs --url")
	}
	c.cfg.MaxGrowth = int64(c.growth)
	return c, nil
}

func loadEnvName(flag string) string {
	return "JETGATE_LOAD_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

func runLoad(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c, err := parseLoad(args, os.LookupEnv)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(stdout, loadUsage())
		return nil
	}
	if err != nil {
		return err
	}
	if c.dataDir == "" {
		tmp, err := os.MkdirTemp("", "jetgate-load-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		c.dataDir = tmp
	}
	env, err := bench.Start(ctx, bench.EnvConfig{DataDir: c.dataDir, URL: c.url, JetgatePID: c.cfg.JetgatePID})
	if err != nil {
		return err
	}
	c.cfg.Progress = stderr
	rep, runErr := env.Load(ctx, c.cfg)
	if err := env.Close(); err != nil && runErr == nil {
		runErr = fmt.Errorf("stop jetgate: %w", err)
	}
	if runErr != nil {
		return runErr
	}
	if c.jsonOut {
		b, err := json.MarshalIndent(rep, "", "  ")
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%s\n", b)
	} else {
		fmt.Fprint(stdout, rep.Text())
	}
	if !rep.Pass {
		return fmt.Errorf("%w: %s", bench.ErrLoadFailed, strings.Join(rep.Reasons, "; "))
	}
	return nil
}

func loadUsage() string {
	var c loadConfig
	fs := newLoadFlags(&c)
	var b strings.Builder
	fmt.Fprintf(&b, "Usage:\n  jetgate load [flags]\n\n%s\n\nFlags:\n", loadIntro)
	for _, nf := range loadFlagOrder {
		f := fs.Lookup(nf[0])
		fmt.Fprintf(&b, "  --%s (%s", strings.TrimSpace(f.Name+" "+nf[1]), loadEnvName(f.Name))
		if f.DefValue != "" && f.DefValue != "false" && f.DefValue != "0" {
			fmt.Fprintf(&b, ", default %s", f.DefValue)
		}
		fmt.Fprintf(&b, ")\n%s", wrap(f.Usage, "      ", 78))
	}
	b.WriteString("\nExample:\n  jetgate load --duration 60s      # calibrate 10s, then 60s at twice that\n")
	return b.String()
}
