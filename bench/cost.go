package bench

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Per-job cost metrics, read from the nats-server's own counters.
var (
	storedPerJob   = Metric{Name: "stored/job", Lower: true}
	removedPerJob  = Metric{Name: "removed/job", Lower: true}
	msgsInPerJob   = Metric{Name: "msgs in/job", Lower: true}
	msgsOutPerJob  = Metric{Name: "msgs out/job", Lower: true}
	bytesInPerJob  = Metric{Name: "bytes in/job", Lower: true}
	bytesOutPerJob = Metric{Name: "bytes out/job", Lower: true}
	cpuPerJob      = Metric{Name: "process CPU µs/job", Lower: true}
	serverCPUJob   = Metric{Name: "nats-server CPU µs/job", Lower: true}
	jetgateCPUJob  = Metric{Name: "jetgate CPU µs/job", Lower: true}
)

// costMetrics are the metrics of a per-job cost case; serverCPU adds the
// nats-server's CPU, measurable only when it runs in another process, and
// jetgateCPU a separate jetgate process's.
func costMetrics(serverCPU, jetgateCPU bool) []Metric {
	ms := []Metric{storedPerJob, removedPerJob, msgsInPerJob, msgsOutPerJob, bytesInPerJob, bytesOutPerJob, cpuPerJob}
	if serverCPU {
		ms = append(ms, serverCPUJob)
	}
	if jetgateCPU {
		ms = append(ms, jetgateCPUJob)
	}
	return append(ms, jobsPerSec)
}

// Per-stream metrics are named with these prefixes and the stream's name;
// they stay out of the main table and make the per-job cost table's
// "by stream" column.
const (
	storedStreamPrefix  = "stored/job "
	removedStreamPrefix = "removed/job "
)

// errNoMonitor: the server's counters cannot be read.
var errNoMonitor = errors.New("the per-job cost needs the NATS server's counters: with --nats-url, give its monitoring URL (--nats-monitor)")

// measureCost runs a workload of jobs and divides by its job count what
// the server counted meanwhile: stored messages (LastSeq deltas over every
// stream, so work-queue and KV streams that remove messages again are
// counted by their writes) and removals (writes minus growth), messages
// and bytes in and out (Varz), and CPU: the whole process's, and the
// nats-server's when it is another process. The workload's own Sample
// (jobs/s, ...) is kept. After the workload the counters must settle, so
// writes no answer waited for are counted too.
func (e *Env) measureCost(ctx context.Context, run func(context.Context) (Sample, error)) (Sample, error) {
	if e.mon == nil {
		return Sample{}, errNoMonitor
	}
	before, err := settle(ctx, e.mon)
	if err != nil {
		return Sample{}, err
	}
	cpu, err := startCPUMeter(ctx, e.mon)
	if err != nil {
		return Sample{}, err
	}
	defer cpu.close()
	var jg0 time.Duration
	if e.jetgatePID > 0 {
		if jg0, err = procCPU(e.jetgatePID); err != nil {
			return Sample{}, fmt.Errorf("jetgate CPU: %w", err)
		}
	}
	s, err := run(ctx)
	if err != nil {
		return s, err
	}
	after, err := settle(ctx, e.mon)
	if err != nil {
		return s, err
	}
	proc, srv, err := cpu.stop()
	if err != nil {
		return s, err
	}
	jg := time.Duration(-1)
	if e.jetgatePID > 0 {
		jg1, err := procCPU(e.jetgatePID)
		if err != nil {
			return s, fmt.Errorf("jetgate CPU: %w", err)
		}
		jg = jg1 - jg0
	}
	if s.Ops <= 0 {
		return s, fmt.Errorf("cost: the workload did no job")
	}
	if s.Metrics == nil {
		s.Metrics = map[string]float64{}
	}
	per := func(x float64) float64 { return x / float64(s.Ops) }
	var stored, removed uint64
	for name, a := range after.Streams {
		b := before.Streams[name]
		w := a.LastSeq - min(b.LastSeq, a.LastSeq)
		// Messages removed = written - net growth (a purge counts too).
		rm := int64(w) - (int64(a.Msgs) - int64(b.Msgs))
		rm = max(rm, 0)
		stored += w
		removed += uint64(rm)
		if w > 0 {
			s.Metrics[storedStreamPrefix+name] = per(float64(w))
		}
		if rm > 0 {
			s.Metrics[removedStreamPrefix+name] = per(float64(rm))
		}
	}
	s.Metrics[storedPerJob.Name] = per(float64(stored))
	s.Metrics[removedPerJob.Name] = per(float64(removed))
	s.Metrics[msgsInPerJob.Name] = per(float64(after.InMsgs - before.InMsgs))
	s.Metrics[msgsOutPerJob.Name] = per(float64(after.OutMsgs - before.OutMsgs))
	s.Metrics[bytesInPerJob.Name] = per(float64(after.InBytes - before.InBytes))
	s.Metrics[bytesOutPerJob.Name] = per(float64(after.OutBytes - before.OutBytes))
	s.Metrics[cpuPerJob.Name] = per(float64(proc) / float64(time.Microsecond))
	if srv >= 0 {
		s.Metrics[serverCPUJob.Name] = per(float64(srv) / float64(time.Microsecond))
	}
	if jg >= 0 {
		s.Metrics[jetgateCPUJob.Name] = per(float64(jg) / float64(time.Microsecond))
	}
	return s, nil
}

// streamStat is one stream's median of a per-stream metric.
type streamStat struct {
	Stream string
	Median float64
}

// streamMetrics lists the per-stream metrics of samples (prefix: stored
// or removed) by stream name, with each one's median over the samples (0
// where a sample lacks it).
func streamMetrics(samples []Sample, prefix string) []streamStat {
	var names []string
	for _, s := range samples {
		for k := range s.Metrics {
			if name, ok := strings.CutPrefix(k, prefix); ok && !slices.Contains(names, name) {
				names = append(names, name)
			}
		}
	}
	slices.Sort(names)
	out := make([]streamStat, 0, len(names))
	for _, n := range names {
		xs := make([]float64, len(samples))
		for i, s := range samples {
			xs[i] = s.Metrics[prefix+n]
		}
		out = append(out, streamStat{Stream: n, Median: statOf(xs).Median})
	}
	return out
}
