package bench

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// The load test (issue 20): producers enqueue single jobs over HTTP at a
// fixed arrival rate, open loop, at twice what the same workload sustains
// (measured first, closed loop), into a bounded queue that rejects when
// full, while SDK-style workers drain it at full speed. The overload must
// come back as documented 429s, fast; latency of every request stays
// bounded, nothing else fails, and memory stays flat.
//
// Latency is measured from each request's intended send time, not from
// when a free sender picked it up, so a server that stalls cannot hide
// the wait of the requests queued behind it (coordinated omission). The
// senders are bounded (LoadConfig.Senders); an arrival that finds all of
// them busy waits for one, and its wait counts.

// LoadConfig is what a load run is told.
type LoadConfig struct {
	// Rate is the enqueue arrival rate per second; 0 measures the
	// sustained throughput first (Calibrate) and uses Factor times it.
	Rate   float64
	Factor float64 // default 2
	// Calibrate is how long the closed-loop measurement runs (default 10s).
	Calibrate time.Duration
	// Duration of the open-loop run (default 60s).
	Duration time.Duration
	// Handlers of the SDK-style worker (default 100), Senders bounds the
	// enqueue requests in flight (default 256).
	Handlers int
	Senders  int
	// MaxDepth bounds the queue (reject when full; default 5,000).
	MaxDepth int
	// Work is how long each handler takes per job before its ack (0: a
	// no-op handler).
	Work time.Duration
	// P99Bound is the pass bound of every kind of request's p99 latency
	// (default 500ms); MaxGrowth the pass bound of memory growth from the
	// first tenth of the run to its end (default 64 MiB).
	P99Bound  time.Duration
	MaxGrowth int64
	// JetgatePID reads the jetgate process's resident memory from /proc
	// (a jetgate at --url); 0 reads this process's (in-process jetgate,
	// load generator included).
	JetgatePID int
	// PayloadBytes of each job (default 200).
	PayloadBytes int
	// Progress, if set, gets a line per second.
	Progress io.Writer
}

func (c LoadConfig) withDefaults() LoadConfig {
	c.Factor = cmp.Or(c.Factor, 2)
	c.Calibrate = cmp.Or(c.Calibrate, 10*time.Second)
	c.Duration = cmp.Or(c.Duration, 60*time.Second)
	c.Handlers = cmp.Or(c.Handlers, 100)
	c.Senders = cmp.Or(c.Senders, 256)
	c.MaxDepth = cmp.Or(c.MaxDepth, 5000)
	c.P99Bound = cmp.Or(c.P99Bound, 500*time.Millisecond)
	c.MaxGrowth = cmp.Or(c.MaxGrowth, 64<<20)
	c.PayloadBytes = cmp.Or(c.PayloadBytes, 200)
	return c
}

// LoadReport is what a load run measured.
type LoadReport struct {
	Sustained  float64       `json:"sustained_jobs_per_sec"` // closed-loop calibration (0 if Rate was given)
	Rate       float64       `json:"rate_per_sec"`           // offered enqueue rate
	Duration   time.Duration `json:"duration_ns"`
	MaxDepth   int           `json:"max_depth"`
	Offered    int64         `json:"offered"`
	Accepted   int64         `json:"accepted"`    // 201
	Refused    int64         `json:"refused_429"` // 429 QUEUE_FULL
	Completed  int64         `json:"completed"`
	Errors     int64         `json:"errors"` // anything else, any request
	ErrorLines []string      `json:"error_samples,omitempty"`
	// Latencies per kind (enqueue, fetch, ack), from the intended time.
	Latency map[string]LatencySummary `json:"latency"`
	// Memory samples, one per second: resident bytes (RSS) and, in
	// process, the Go heap in use.
	RSS       []int64 `json:"rss_bytes"`
	HeapInUse []int64 `json:"heap_inuse_bytes,omitempty"`
	// Growth is the resident memory at the end less the highest sample of
	// the first tenth of the run.
	Growth int64 `json:"rss_growth_bytes"`
	// RefusalSample is the body of the first 429.
	RefusalSample string   `json:"refusal_sample,omitempty"`
	Pass          bool     `json:"pass"`
	Reasons       []string `json:"fail_reasons,omitempty"`
}

// LatencySummary is a latency distribution.
type LatencySummary struct {
	N    int           `json:"n"`
	P50  time.Duration `json:"p50_ns"`
	P99  time.Duration `json:"p99_ns"`
	P999 time.Duration `json:"p999_ns"`
	Max  time.Duration `json:"max_ns"`
}

// Load runs the load test against the jetgate of e (its HTTP API).
func (e *Env) Load(ctx context.Context, cfg LoadConfig) (*LoadReport, error) {
	cfg = cfg.withDefaults()
	lr := &loadRun{cfg: cfg, base: e.httpURL + "/ojs/v1", lat: map[string]*latencies{}}
	lr.hc = keepAliveClient(cfg.Senders + cfg.Handlers + 8)
	defer lr.hc.CloseIdleConnections()
	rep := &LoadReport{MaxDepth: cfg.MaxDepth, Rate: cfg.Rate}
	if rep.Rate <= 0 {
		q := fmt.Sprintf("load-cal-%d", nextRun())
		if err := lr.bound(ctx, q, 0); err != nil {
			return nil, err
		}
		n, err := lr.closedLoop(ctx, q, cfg.Calibrate)
		if err != nil {
			return nil, fmt.Errorf("calibrate: %w", err)
		}
		rep.Sustained = float64(n) / cfg.Calibrate.Seconds()
		rep.Rate = rep.Sustained * cfg.Factor
		lr.progress("sustained %.0f jobs/s closed loop; offering %.0f/s for %s", rep.Sustained, rep.Rate, cfg.Duration)
	}
	lr.queue = fmt.Sprintf("load-%d", nextRun())
	if err := lr.bound(ctx, lr.queue, cfg.MaxDepth); err != nil {
		return nil, err
	}
	if err := lr.openLoop(ctx, rep, cfg.JetgatePID); err != nil {
		return nil, err
	}
	lr.finish(rep)
	return rep, nil
}

type loadRun struct {
	cfg   LoadConfig
	base  string
	hc    *http.Client
	queue string

	mu     sync.Mutex
	lat    map[string]*latencies
	errs   atomic.Int64
	errMu  sync.Mutex
	errTxt []string

	offered, accepted, refused, completed atomic.Int64

	refusalOnce sync.Once
	refusal     string // the first 429 body
}

type latencies struct{ d []time.Duration }

func (lr *loadRun) note(kind string, d time.Duration) {
	lr.mu.Lock()
	l := lr.lat[kind]
	if l == nil {
		l = &latencies{d: make([]time.Duration, 0, 1<<16)}
		lr.lat[kind] = l
	}
	l.d = append(l.d, d)
	lr.mu.Unlock()
}

func (lr *loadRun) fail(format string, a ...any) {
	lr.errs.Add(1)
	lr.errMu.Lock()
	if len(lr.errTxt) < 20 {
		lr.errTxt = append(lr.errTxt, fmt.Sprintf(format, a...))
	}
	lr.errMu.Unlock()
}

func (lr *loadRun) progress(format string, a ...any) {
	if lr.cfg.Progress != nil {
		fmt.Fprintf(lr.cfg.Progress, format+"\n", a...)
	}
}

// bound sets the queue's bound (0: unbounded) with the reject strategy.
func (lr *loadRun) bound(ctx context.Context, queue string, depth int) error {
	body := fmt.Appendf(nil, `{"backpressure":{"max_depth":%d,"strategy":"reject"}}`, depth)
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, lr.base+"/queues/"+queue+"/config", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := lr.hc.Do(req)
	if err != nil {
		return fmt.Errorf("bound queue %s: %w", queue, err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("bound queue %s: status %d: %.200s", queue, res.StatusCode, raw)
	}
	return nil
}

// do posts body and returns the status and body.
func (lr *loadRun) do(ctx context.Context, path string, body []byte) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, lr.base+path, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/openjobspec+json")
	res, err := lr.hc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	return res.StatusCode, raw, err
}

// enqueue sends one job; accepted reports a 201, refused a 429.
func (lr *loadRun) enqueue(ctx context.Context, queue string, i int) (accepted, refused bool) {
	code, raw, err := lr.do(ctx, "/jobs", jobBody(queue, i, lr.cfg.PayloadBytes))
	switch {
	case err != nil:
		if ctx.Err() == nil {
			lr.fail("enqueue: %v", err)
		}
	case code == http.StatusCreated:
		return true, false
	case code == http.StatusTooManyRequests && bytes.Contains(raw, []byte("QUEUE_FULL")):
		lr.refusalOnce.Do(func() { lr.refusal = string(raw) })
		return false, true
	default:
		lr.fail("enqueue: status %d: %.200s", code, raw)
	}
	return false, false
}

// work runs an SDK-style worker (fetch for the free handler slots, one
// ack per job) on queue until ctx ends, counting acks.
func (lr *loadRun) work(ctx context.Context, queue string, acked *atomic.Int64) {
	handlers := lr.cfg.Handlers
	free := make(chan struct{}, handlers)
	for range handlers {
		free <- struct{}{}
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	worker := fmt.Sprintf("load-%d", nextRun())
	for {
		select {
		case <-free:
		case <-ctx.Done():
			return
		}
		k := 1 + takeFree(free, handlers-1)
		t0 := time.Now()
		code, raw, err := lr.do(ctx, "/workers/fetch", fmt.Appendf(nil, `{"queues":[%q],"count":%d,"worker_id":%q}`, queue, k, worker))
		if ctx.Err() != nil {
			return
		}
		lr.note("fetch", time.Since(t0))
		var got struct {
			Jobs []struct {
				ID string `json:"id"`
			} `json:"jobs"`
		}
		if err == nil && code == http.StatusOK {
			err = json.Unmarshal(raw, &got)
		} else if err == nil {
			err = fmt.Errorf("status %d: %.200s", code, raw)
		}
		if err != nil {
			lr.fail("fetch: %v", err)
			for range k {
				free <- struct{}{}
			}
			continue
		}
		for range k - len(got.Jobs) {
			free <- struct{}{}
		}
		if len(got.Jobs) == 0 {
			// The SDK sleeps its poll interval after an empty fetch;
			// a short pause keeps the worker close to the arrivals.
			select {
			case <-time.After(10 * time.Millisecond):
			case <-ctx.Done():
				return
			}
		}
		for _, j := range got.Jobs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() { free <- struct{}{} }()
				if lr.cfg.Work > 0 {
					select {
					case <-time.After(lr.cfg.Work):
					case <-ctx.Done():
						return
					}
				}
				t0 := time.Now()
				code, raw, err := lr.do(ctx, "/workers/ack", fmt.Appendf(nil, `{"job_id":%q}`, j.ID))
				if ctx.Err() != nil {
					return
				}
				lr.note("ack", time.Since(t0))
				if err != nil || code != http.StatusOK {
					lr.fail("ack %s: status %d: %v %.200s", j.ID, code, err, raw)
					return
				}
				acked.Add(1)
			}()
		}
	}
}

// closedLoop runs senders enqueueing back to back and the worker draining
// for d, and returns the jobs completed meanwhile.
func (lr *loadRun) closedLoop(ctx context.Context, queue string, d time.Duration) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var acked atomic.Int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); lr.work(ctx, queue, &acked) }()
	var next atomic.Int64
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				lr.enqueue(ctx, queue, int(next.Add(1)))
			}
		}()
	}
	wg.Wait()
	if lr.errs.Load() > 0 {
		return 0, fmt.Errorf("%d requests failed: %s", lr.errs.Load(), strings.Join(lr.errTxt, "; "))
	}
	lr.mu.Lock()
	clear(lr.lat)
	lr.mu.Unlock()
	return acked.Load(), nil
}

// openLoop offers rep.Rate enqueues a second for the configured duration
// while the worker drains, sampling memory each second.
func (lr *loadRun) openLoop(ctx context.Context, rep *LoadReport, pid int) error {
	cfg := lr.cfg
	workCtx, stopWork := context.WithCancel(ctx)
	defer stopWork()
	var worker, wg sync.WaitGroup
	worker.Add(1)
	go func() { defer worker.Done(); lr.work(workCtx, lr.queue, &lr.completed) }()

	type arrival struct {
		i  int
		at time.Time
	}
	arrivals := make(chan arrival, 1<<16)
	for range cfg.Senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for a := range arrivals {
				ok, refused := lr.enqueue(ctx, lr.queue, a.i)
				if ctx.Err() != nil {
					continue
				}
				lr.note("enqueue", time.Since(a.at))
				switch {
				case ok:
					lr.accepted.Add(1)
				case refused:
					lr.refused.Add(1)
				}
			}
		}()
	}
	start := time.Now()
	interval := time.Duration(float64(time.Second) / rep.Rate)
	sampleAt := start.Add(time.Second)
	i := 0
	for {
		now := time.Now()
		if now.Sub(start) >= cfg.Duration || ctx.Err() != nil {
			break
		}
		// Every arrival due by now goes out, each stamped with its own
		// intended time.
		for due := start.Add(time.Duration(i) * interval); !due.After(now); due = start.Add(time.Duration(i) * interval) {
			select {
			case arrivals <- arrival{i: i, at: due}:
			default:
				lr.fail("load generator fell behind: %d arrivals queued", len(arrivals))
			}
			i++
		}
		if !now.Before(sampleAt) {
			rss, heap := memorySample(pid)
			rep.RSS = append(rep.RSS, rss)
			if heap > 0 {
				rep.HeapInUse = append(rep.HeapInUse, heap)
			}
			lr.progress("%3ds offered %d accepted %d refused %d completed %d errors %d rss %d MiB",
				int(now.Sub(start).Seconds()), i, lr.accepted.Load(), lr.refused.Load(), lr.completed.Load(), lr.errs.Load(), rss>>20)
			sampleAt = sampleAt.Add(time.Second)
		}
		time.Sleep(min(interval, time.Millisecond))
	}
	rep.Duration = time.Since(start)
	rep.Offered = int64(i)
	close(arrivals)
	// Senders finish the requests already queued (each bounded by the
	// HTTP client's timeout), so every offered enqueue gets its answer;
	// then the worker drains what was accepted (at most 30 s more).
	wg.Wait()
	for deadline := time.Now().Add(30 * time.Second); lr.completed.Load() < lr.accepted.Load() && time.Now().Before(deadline) && ctx.Err() == nil; {
		time.Sleep(10 * time.Millisecond)
	}
	stopWork()
	worker.Wait()
	return nil
}

// finish fills in the summary and the verdict.
func (lr *loadRun) finish(rep *LoadReport) {
	rep.Accepted, rep.Refused, rep.Completed = lr.accepted.Load(), lr.refused.Load(), lr.completed.Load()
	rep.Errors = lr.errs.Load()
	rep.ErrorLines = slices.Clone(lr.errTxt)
	rep.RefusalSample = lr.refusal
	rep.Latency = map[string]LatencySummary{}
	lr.mu.Lock()
	for kind, l := range lr.lat {
		rep.Latency[kind] = summarize(l.d)
	}
	lr.mu.Unlock()
	if n := len(rep.RSS); n > 0 {
		first := slices.Max(rep.RSS[:max(n/10, 1)])
		rep.Growth = rep.RSS[n-1] - first
	}
	if rep.Errors > 0 {
		rep.Reasons = append(rep.Reasons, fmt.Sprintf("%d failed requests", rep.Errors))
	}
	for _, kind := range []string{"enqueue", "fetch", "ack"} {
		if s := rep.Latency[kind]; s.P99 > lr.cfg.P99Bound {
			rep.Reasons = append(rep.Reasons, fmt.Sprintf("%s p99 %s above %s", kind, s.P99.Round(time.Millisecond), lr.cfg.P99Bound))
		}
	}
	if rep.Growth > lr.cfg.MaxGrowth {
		rep.Reasons = append(rep.Reasons, fmt.Sprintf("resident memory grew %d MiB (bound %d MiB)", rep.Growth>>20, lr.cfg.MaxGrowth>>20))
	}
	rep.Pass = len(rep.Reasons) == 0
}

func summarize(d []time.Duration) LatencySummary {
	if len(d) == 0 {
		return LatencySummary{}
	}
	slices.Sort(d)
	at := func(q float64) time.Duration { return d[min(int(q*float64(len(d))), len(d)-1)] }
	return LatencySummary{N: len(d), P50: at(0.50), P99: at(0.99), P999: at(0.999), Max: d[len(d)-1]}
}

// memorySample reads the resident memory of pid (0: this process) from
// /proc, and in process the Go heap in use.
func memorySample(pid int) (rss, heap int64) {
	path := "/proc/self/status"
	if pid > 0 {
		path = "/proc/" + strconv.Itoa(pid) + "/status"
	} else {
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		heap = int64(ms.HeapInuse)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, heap
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err == nil {
				return kb << 10, heap
			}
		}
	}
	return 0, heap
}

// Text renders the report for people.
func (r *LoadReport) Text() string {
	var b strings.Builder
	if r.Sustained > 0 {
		fmt.Fprintf(&b, "sustained (closed loop): %.0f jobs/s\n", r.Sustained)
	}
	fmt.Fprintf(&b, "offered: %.0f enqueues/s for %s into a queue bounded at %d (reject)\n", r.Rate, r.Duration.Round(time.Second), r.MaxDepth)
	fmt.Fprintf(&b, "enqueues: %d offered, %d accepted (201), %d refused (429 QUEUE_FULL); %d jobs completed (%.0f/s); %d errors\n",
		r.Offered, r.Accepted, r.Refused, r.Completed, float64(r.Completed)/max(r.Duration.Seconds(), 1e-9), r.Errors)
	for _, kind := range []string{"enqueue", "fetch", "ack"} {
		s := r.Latency[kind]
		fmt.Fprintf(&b, "%-8s n=%-8d p50 %-8s p99 %-8s p99.9 %-8s max %s\n", kind, s.N, ms(s.P50), ms(s.P99), ms(s.P999), ms(s.Max))
	}
	if n := len(r.RSS); n > 0 {
		fmt.Fprintf(&b, "resident memory: %d MiB after 1s, %d MiB max, %d MiB at the end (growth after the first tenth: %+d MiB",
			r.RSS[0]>>20, slices.Max(r.RSS)>>20, r.RSS[n-1]>>20, r.Growth>>20)
		if r.Completed > 0 {
			// Finished jobs stay readable for the server's retention, and
			// the store's memory grows with them (docs/performance.md).
			fmt.Fprintf(&b, ", %d B per job completed", r.Growth/r.Completed)
		}
		b.WriteString(")\n")
	}
	if r.RefusalSample != "" {
		fmt.Fprintf(&b, "first refusal: %.400s\n", strings.TrimSpace(r.RefusalSample))
	}
	for _, l := range r.ErrorLines {
		fmt.Fprintf(&b, "error: %s\n", l)
	}
	if r.Pass {
		b.WriteString("PASS\n")
	} else {
		fmt.Fprintf(&b, "FAIL: %s\n", strings.Join(r.Reasons, "; "))
	}
	return b.String()
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond)) }

// ErrLoadFailed is returned by the load command when the run failed its
// bounds.
var ErrLoadFailed = errors.New("load test failed its bounds")
