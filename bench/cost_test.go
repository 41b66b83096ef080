package bench

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/jetgate/jetgate/jetstream/natstest"
)

// costTiny runs the cost scenario (and drain-http) at a size the suite
// can afford.
var costTiny = Params{Duration: 60 * time.Millisecond, Rounds: 1, Workers: 2, PayloadBytes: 128, CostJobs: 40, DrainJobs: 60, NoWarmup: true}

// runCost runs the cost scenario on e and returns its cases.
func runCost(t *testing.T, e *Env) *Results {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sc, err := Lookup("cost")
	if err != nil {
		t.Fatal(err)
	}
	res, err := Run(ctx, e, sc, costTiny, NewBar(&bytes.Buffer{}, false))
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// checkCost asserts what the counters must say whatever the layout: raw
// JetStream stores exactly one message per job in its stream and removes
// it again at the ack (work-queue retention); jetgate stores at least one
// message per job (the job has to be somewhere), into its record bucket
// among others; messages go in and out, CPU is spent. Issue 17 "Goals":
// the per-job cost table, next to raw JetStream's, from the server's own
// counters.
func checkCost(t *testing.T, res *Results, serverCPU, jetgateCPU bool) {
	t.Helper()
	cases := res.Scenarios[0].Cases
	if len(cases) != 3 {
		t.Fatalf("%d cost cases, want 3", len(cases))
	}
	for _, c := range cases {
		raw, jg := c.Rounds[0].Baseline, c.Rounds[0].Jetgate
		if got := raw.Metrics[storedStreamPrefix+rawStream]; got != 1 {
			t.Errorf("%s: raw stores %v messages per job in %s, want exactly 1", c.Name, got, rawStream)
		}
		if got := raw.Metrics[removedStreamPrefix+rawStream]; got != 1 {
			t.Errorf("%s: raw removes %v messages per job from %s, want exactly 1 (work queue)", c.Name, got, rawStream)
		}
		if got := jg.Metrics[storedPerJob.Name]; got < 1 {
			t.Errorf("%s: jetgate stores %v messages per job, want at least 1", c.Name, got)
		}
		if got := jg.Metrics[storedStreamPrefix+"KV_OJS_JOBS"]; got <= 0 {
			t.Errorf("%s: jetgate stores %v job records per job", c.Name, got)
		}
		for side, s := range map[string]Sample{"raw": raw, "jetgate": jg} {
			if s.Ops != int64(costTiny.CostJobs) {
				t.Errorf("%s/%s: %d jobs, want %d", c.Name, side, s.Ops, costTiny.CostJobs)
			}
			for _, m := range costMetrics(serverCPU, jetgateCPU) {
				v, ok := s.Metrics[m.Name]
				if !ok {
					t.Errorf("%s/%s: no %s", c.Name, side, m.Name)
				}
				// Removals may be 0; the server's CPU is estimated from
				// /varz without a pid and may round to 0 on a short run;
				// /proc counts CPU in 10 ms ticks, and the raw side's 40
				// jobs run no jetgate code, so its jetgate CPU may be 0.
				zeroOK := m == removedPerJob || m == serverCPUJob || (side == "raw" && m == jetgateCPUJob)
				if !zeroOK && v <= 0 {
					t.Errorf("%s/%s: %s = %v", c.Name, side, m.Name, v)
				}
			}
			if _, ok := s.Metrics[serverCPUJob.Name]; ok != serverCPU {
				t.Errorf("%s/%s: nats-server CPU measured = %v, want %v", c.Name, side, ok, serverCPU)
			}
			if _, ok := s.Metrics[jetgateCPUJob.Name]; ok != jetgateCPU {
				t.Errorf("%s/%s: jetgate CPU measured = %v, want %v", c.Name, side, ok, jetgateCPU)
			}
		}
	}
	table := res.CostTable()
	lines := strings.Split(strings.TrimSpace(table), "\n")
	if len(lines) != 2+2*len(cases) {
		t.Fatalf("cost table has %d lines, want a header and a row per case and side:\n%s", len(lines), table)
	}
	for _, col := range []string{"stored/job", "stored by stream", "removed/job", "removed by stream", "msgs in/job", "msgs out/job",
		"bytes in/job", "bytes out/job", "process CPU µs/job", "nats-server CPU µs/job", "jetgate CPU µs/job"} {
		if !strings.Contains(lines[0], "| "+col+" |") {
			t.Errorf("cost table lacks column %q: %s", col, lines[0])
		}
	}
	for _, l := range lines[2:] {
		if cells := strings.Count(l, "|") - 1; cells != 13 {
			t.Errorf("cost table row has %d cells, want 13: %s", cells, l)
		}
		if !strings.Contains(l, "KV_OJS_JOBS") && !strings.Contains(l, rawStream+" 1.00") {
			t.Errorf("cost table row names no stream: %s", l)
		}
	}
	if md := res.Markdown(nil); !strings.Contains(md, "## Per-job cost") || !strings.Contains(md, table) {
		t.Errorf("report.md lacks the per-job cost table")
	}
}

// TestCostEmbedded reads the embedded server's counters in-process.
func TestCostEmbedded(t *testing.T) {
	e := startEnv(t)
	checkCost(t, runCost(t, e), false, false)
}

// TestCostExternal runs jetgate on a separate nats-server (--nats-url)
// and reads its counters over its monitoring port (/varz, /jsz), its CPU
// and jetgate's from /proc (--nats-pid, --jetgate-pid; here both are the
// test's own process, which hosts them).
func TestCostExternal(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc")
	}
	ns := natstest.RunServerOpts(t, func(o *server.Options) { o.HTTPHost, o.HTTPPort = "127.0.0.1", -1 })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	e, err := Start(ctx, EnvConfig{NatsURL: ns.ClientURL(), NatsMonitor: "http://" + ns.MonitorAddr().String(),
		NatsPID: os.Getpid(), JetgatePID: os.Getpid()})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := e.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	}()
	checkCost(t, runCost(t, e), true, true)

	// Both ways of reading the server agree.
	got, err := e.mon.counters(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want, err := embeddedMonitor{ns: ns}.counters(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got.Streams) != fmt.Sprint(want.Streams) || got.InMsgs > want.InMsgs || got.InMsgs == 0 {
		t.Errorf("/jsz, /varz over HTTP = %v, %d msgs in; in-process = %v, %d", got.Streams, got.InMsgs, want.Streams, want.InMsgs)
	}
}

// TestCostNeedsCounters: without a way to read the server's counters the
// cost scenario fails and says what is missing.
func TestCostNeedsCounters(t *testing.T) {
	e := &Env{}
	_, err := e.measureCost(context.Background(), func(context.Context) (Sample, error) { return Sample{}, nil })
	if err == nil || !strings.Contains(err.Error(), "--nats-monitor") {
		t.Errorf("err = %v, want one naming --nats-monitor", err)
	}
}

// TestSDKDrainAsksForFreeSlots checks the drain's worker behaves like
// the official Go SDK worker (spec README, "What the official OJS clients
// send"): each fetch asks for its free handler slots, never more jobs run
// at once than it has handlers, each job is acked on its own, and every
// job is acked once. It runs on an in-memory queue: this is the harness's
// logic, not JetStream's.
func TestSDKDrainAsksForFreeSlots(t *testing.T) {
	const n, handlers = 500, 8
	var mu sync.Mutex
	next := 0
	var counts []int
	var running, peak atomic.Int64
	release := make(chan struct{})
	var once sync.Once
	fetch := func(_ context.Context, count int) ([]drainJob, error) {
		mu.Lock()
		defer mu.Unlock()
		counts = append(counts, count)
		var jobs []drainJob
		// Answer 3 jobs at most: the worker must come back for the rest.
		for k := 0; k < min(count, 3) && next < n; k++ {
			i := next
			next++
			jobs = append(jobs, drainJob{index: i, id: fmt.Sprint(i), ack: func(ctx context.Context) error {
				r := running.Add(1)
				for p := peak.Load(); r > p && !peak.CompareAndSwap(p, r); p = peak.Load() {
				}
				// The first jobs hold their slots until the worker has
				// fetched with fewer free slots than handlers.
				if i < 3 {
					select {
					case <-release:
					case <-ctx.Done():
						return ctx.Err()
					}
				}
				running.Add(-1)
				return nil
			}})
		}
		if len(counts) > 1 && count < handlers {
			once.Do(func() { close(release) })
		}
		return jobs, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := sdkDrain(ctx, n, handlers, time.Millisecond, fetch)
	if err != nil {
		t.Fatal(err)
	}
	if s.Ops != n || s.Metrics["jobs/s"] <= 0 {
		t.Errorf("drain: %d jobs, %v jobs/s", s.Ops, s.Metrics["jobs/s"])
	}
	if counts[0] != handlers {
		t.Errorf("first fetch asked for %d jobs, want every handler slot (%d)", counts[0], handlers)
	}
	if counts[1] != handlers-3 {
		t.Errorf("second fetch asked for %d jobs, want the %d slots left free", counts[1], handlers-3)
	}
	for _, c := range counts {
		if c < 1 || c > handlers {
			t.Errorf("a fetch asked for %d jobs with %d handlers", c, handlers)
		}
	}
	if p := peak.Load(); p > handlers {
		t.Errorf("%d jobs ran at once on %d handlers", p, handlers)
	}
}

// fixedCPU is a monitor whose server always reports the same CPU share.
type fixedCPU struct{ percent float64 }

func (f fixedCPU) counters(context.Context) (counters, error) {
	return counters{CPUPercent: f.percent, Streams: map[string]streamCount{}}, nil
}
func (fixedCPU) serverCPU() (time.Duration, bool, error) { return 0, false, nil }
func (fixedCPU) inProcess() bool                         { return false }
func (fixedCPU) close()                                  {}

// TestCPUSamplerIntegrates: without the server's pid, its CPU over a run
// is /varz's cpu share integrated over the run's wall time.
func TestCPUSamplerIntegrates(t *testing.T) {
	start := time.Now()
	m, err := startCPUMeter(context.Background(), fixedCPU{percent: 50})
	if err != nil {
		t.Fatal(err)
	}
	proc, srv, err := m.stop()
	wall := time.Since(start)
	m.close()
	if err != nil || proc < 0 {
		t.Fatalf("stop: %v, %v", proc, err)
	}
	// The sampler's window lies within the one measured here.
	if srv <= 0 || srv > wall/2+time.Microsecond {
		t.Errorf("a server at 50%% over %s used %s of CPU", wall, srv)
	}
}

// TestProcCPU: /proc/<pid>/stat reads this process's CPU as getrusage does
// (to the kernel's 10 ms ticks).
func TestProcCPU(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc")
	}
	before := processCPU()
	got, err := procCPU(os.Getpid())
	after := processCPU()
	if err != nil {
		t.Fatal(err)
	}
	if got < before-20*time.Millisecond || got > after+20*time.Millisecond {
		t.Errorf("procCPU = %s, getrusage %s..%s", got, before, after)
	}
	if _, err := procCPU(-1); err == nil {
		t.Error("procCPU(-1) did not fail")
	}
}

// TestDrainHTTP runs both sides of drain-http on a few jobs, with a last
// batch shorter than the others, with the workers in processes of their
// own and in the test's: every job is inserted, fetched and acked once
// (the drain verifies it), and jetgate's queue is empty afterwards.
func TestDrainHTTP(t *testing.T) {
	const n, handlers = 250, 8
	e := startEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for name, run := range map[string]func() (Sample, error){
		"raw": func() (Sample, error) { return e.RawBatchDrain(ctx, n, enqueueBatch, handlers, 128, false) },
		"jetgate": func() (Sample, error) {
			return e.HTTPBatchDrain(ctx, "bench-drain-test", n, enqueueBatch, handlers, 128, false)
		},
		"raw in process": func() (Sample, error) { return e.RawBatchDrain(ctx, n, enqueueBatch, handlers, 128, true) },
		"jetgate in process": func() (Sample, error) {
			return e.HTTPBatchDrain(ctx, "bench-drain-test", n, enqueueBatch, handlers, 128, true)
		},
	} {
		s, err := run()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if s.Ops != n || s.Metrics["jobs/s"] <= 0 || s.Metrics[insertPerSec.Name] <= 0 {
			t.Errorf("%s: %d jobs, metrics %v", name, s.Ops, s.Metrics)
		}
		// Raw JetStream answers a fetch with as many messages as asked
		// while there is a backlog: fewer fetches than jobs shows the
		// worker asks for its free slots. (jetgate may answer fewer.)
		if f := s.Metrics["fetches"]; f < 1 || (strings.HasPrefix(name, "raw") && f >= n) {
			t.Errorf("%s: %v fetches for %d jobs on %d handlers", name, f, n, handlers)
		}
	}
	var left fetchResponse
	if err := post(ctx, e.http, e.httpURL+"/ojs/v1/workers/fetch", []byte(`{"queues":["bench-drain-test"],"count":10,"worker_id":"t"}`), 200, &left); err != nil {
		t.Fatal(err)
	}
	if len(left.Jobs) != 0 {
		t.Errorf("%d jobs left in the drained queue", len(left.Jobs))
	}
}
