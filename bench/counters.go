package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// counters is a snapshot of a nats-server's own monitoring counters
// (/varz and /jsz?streams=true), read before and after a workload to count
// what it cost the server.
type counters struct {
	// InMsgs .. OutBytes are the server's totals since it started (Varz):
	// every message and byte it received from or sent to any client.
	InMsgs, OutMsgs, InBytes, OutBytes int64
	// Streams are the streams' states by name (every account).
	Streams map[string]streamCount
	// CPUPercent is the server process's CPU over its last second, as
	// /varz reports it (100 = one core).
	CPUPercent float64
}

// streamCount is one stream's LastSeq (every message it ever stored: a
// stream never reuses a sequence) and Msgs (the messages it holds now).
type streamCount struct {
	LastSeq, Msgs uint64
}

// writes is the sum of LastSeq over every stream: a number that grows by
// one with every stored message, whatever the stream's retention.
func (c counters) writes() uint64 {
	var n uint64
	for _, s := range c.Streams {
		n += s.LastSeq
	}
	return n
}

// monitor reads a nats-server's counters.
type monitor interface {
	counters(ctx context.Context) (counters, error)
	// serverCPU is the nats-server process's CPU time so far, when it
	// can be read exactly (ok false: integrate CPUPercent instead).
	serverCPU() (d time.Duration, ok bool, err error)
	// inProcess says the server runs in this process, so its CPU is part
	// of the process's and cannot be told apart.
	inProcess() bool
	// close releases the monitor's connections.
	close()
}

// embeddedMonitor reads the embedded nats-server in-process.
type embeddedMonitor struct{ ns *server.Server }

func (m embeddedMonitor) counters(context.Context) (counters, error) {
	v, err := m.ns.Varz(nil)
	if err != nil {
		return counters{}, fmt.Errorf("varz: %w", err)
	}
	js, err := m.ns.Jsz(&server.JSzOptions{Streams: true})
	if err != nil {
		return counters{}, fmt.Errorf("jsz: %w", err)
	}
	c := counters{InMsgs: v.InMsgs, OutMsgs: v.OutMsgs, InBytes: v.InBytes, OutBytes: v.OutBytes,
		CPUPercent: v.CPU, Streams: map[string]streamCount{}}
	for _, acc := range js.AccountDetails {
		for _, sd := range acc.Streams {
			c.add(acc.Name, sd.Name, sd.State.LastSeq, sd.State.Msgs)
		}
	}
	return c, nil
}

func (embeddedMonitor) serverCPU() (time.Duration, bool, error) { return 0, false, nil }
func (embeddedMonitor) inProcess() bool                         { return true }
func (embeddedMonitor) close()                                  {}

// add records a stream; streams of accounts other than the global one are
// named account/stream.
func (c *counters) add(account, stream string, lastSeq, msgs uint64) {
	name := stream
	if account != "" && account != server.DEFAULT_GLOBAL_ACCOUNT {
		name = account + "/" + stream
	}
	s := c.Streams[name]
	s.LastSeq += lastSeq
	s.Msgs += msgs
	c.Streams[name] = s
}

// httpMonitor reads a nats-server's monitoring port (its -m/http_port):
// GET /varz and /jsz?streams=true. pid, when set, is the server's process
// id on this machine, whose CPU time is then read from /proc exactly.
type httpMonitor struct {
	base string
	hc   *http.Client
	pid  int
}

func newHTTPMonitor(base string, pid int) *httpMonitor {
	return &httpMonitor{base: strings.TrimRight(base, "/"), hc: &http.Client{Timeout: 10 * time.Second}, pid: pid}
}

// The parts of /varz and /jsz the cost case reads.
type varzJSON struct {
	InMsgs   int64   `json:"in_msgs"`
	OutMsgs  int64   `json:"out_msgs"`
	InBytes  int64   `json:"in_bytes"`
	OutBytes int64   `json:"out_bytes"`
	CPU      float64 `json:"cpu"`
}

type jszJSON struct {
	AccountDetails []struct {
		Name    string `json:"name"`
		Streams []struct {
			Name  string `json:"name"`
			State struct {
				Msgs    uint64 `json:"messages"`
				LastSeq uint64 `json:"last_seq"`
			} `json:"state"`
		} `json:"stream_detail"`
	} `json:"account_details"`
}

func (m *httpMonitor) counters(ctx context.Context) (counters, error) {
	var v varzJSON
	if err := m.get(ctx, "/varz", &v); err != nil {
		return counters{}, err
	}
	var js jszJSON
	if err := m.get(ctx, "/jsz?streams=true&accounts=true&limit=100000", &js); err != nil {
		return counters{}, err
	}
	c := counters{InMsgs: v.InMsgs, OutMsgs: v.OutMsgs, InBytes: v.InBytes, OutBytes: v.OutBytes,
		CPUPercent: v.CPU, Streams: map[string]streamCount{}}
	for _, acc := range js.AccountDetails {
		for _, sd := range acc.Streams {
			c.add(acc.Name, sd.Name, sd.State.LastSeq, sd.State.Msgs)
		}
	}
	return c, nil
}

func (m *httpMonitor) get(ctx context.Context, path string, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, m.base+path, nil)
	if err != nil {
		return err
	}
	res, err := m.hc.Do(req)
	if err != nil {
		return fmt.Errorf("nats-server monitoring: %w", err)
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		return fmt.Errorf("nats-server monitoring %s: %w", path, err)
	}
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("nats-server monitoring %s: status %d: %.200s", path, res.StatusCode, raw)
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("nats-server monitoring %s: %w", path, err)
	}
	return nil
}

// clockTicks is the kernel's USER_HZ, the unit of /proc/<pid>/stat's
// times (100 on every Linux nats-server runs on; nats-server assumes the
// same).
const clockTicks = 100

func (m *httpMonitor) serverCPU() (time.Duration, bool, error) {
	if m.pid <= 0 {
		return 0, false, nil
	}
	d, err := procCPU(m.pid)
	if err != nil {
		return 0, false, fmt.Errorf("nats-server CPU: %w", err)
	}
	return d, true, nil
}

func (*httpMonitor) inProcess() bool { return false }

func (m *httpMonitor) close() { m.hc.CloseIdleConnections() }

// procCPU reads a process's user+system CPU time from /proc/<pid>/stat.
func procCPU(pid int) (time.Duration, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) may hold spaces; the fields after its
	// closing parenthesis start with field 3 (state).
	end := bytes.LastIndexByte(raw, ')')
	if end < 0 {
		return 0, fmt.Errorf("unreadable /proc/%d/stat", pid)
	}
	f := strings.Fields(string(raw[end+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("short /proc/%d/stat", pid)
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64) // field 14
	stime, err2 := strconv.ParseInt(f[12], 10, 64) // field 15
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	return time.Duration(utime+stime) * time.Second / clockTicks, nil
}

// cpuSampler integrates a remote server's /varz cpu (its CPU share over
// the last second) once a second while a workload runs, when its process
// CPU cannot be read directly: an estimate good to about a second of CPU.
type cpuSampler struct {
	stopc chan struct{}
	done  chan time.Duration
}

func startCPUSampler(ctx context.Context, m monitor) *cpuSampler {
	s := &cpuSampler{stopc: make(chan struct{}), done: make(chan time.Duration, 1)}
	go func() {
		tk := time.NewTicker(time.Second)
		defer tk.Stop()
		var total time.Duration
		last := time.Now()
		sample := func() {
			c, err := m.counters(ctx)
			now := time.Now()
			if err == nil {
				total += time.Duration(c.CPUPercent / 100 * float64(now.Sub(last)))
			}
			last = now
		}
		for {
			select {
			case <-tk.C:
				sample()
			case <-s.stopc:
				sample()
				s.done <- total
				return
			}
		}
	}()
	return s
}

func (s *cpuSampler) stop() time.Duration {
	close(s.stopc)
	return <-s.done
}

// cpuMeter measures the CPU a workload costs: this process's (getrusage)
// and, when the server is another process, the nats-server's.
type cpuMeter struct {
	m        monitor
	proc0    time.Duration
	server0  time.Duration
	exact    bool
	sampler  *cpuSampler
	stopOnce sync.Once
}

func startCPUMeter(ctx context.Context, m monitor) (*cpuMeter, error) {
	c := &cpuMeter{m: m, proc0: processCPU()}
	if m.inProcess() {
		return c, nil
	}
	d, ok, err := m.serverCPU()
	if err != nil {
		return nil, err
	}
	if ok {
		c.server0, c.exact = d, true
		return c, nil
	}
	c.sampler = startCPUSampler(ctx, m)
	return c, nil
}

// stop returns the CPU used since start by this process and by the
// server (-1 when the server runs in this process).
func (c *cpuMeter) stop() (proc, srv time.Duration, err error) {
	proc = processCPU() - c.proc0
	switch {
	case c.m.inProcess():
		return proc, -1, nil
	case c.exact:
		d, _, err := c.m.serverCPU()
		return proc, d - c.server0, err
	default:
		c.stopOnce.Do(func() { srv = c.sampler.stop() })
		return proc, srv, nil
	}
}

// close stops a sampler a failed run left running.
func (c *cpuMeter) close() {
	if c.sampler != nil {
		c.stopOnce.Do(func() { c.sampler.stop() })
	}
}

// settle waits until the server's counters stop moving (no stored write
// and no message in for two polls 100 ms apart, at most 3 s): writes a
// workload's last answer did not wait for are then counted too.
func settle(ctx context.Context, m monitor) (counters, error) {
	prev, err := m.counters(ctx)
	if err != nil {
		return prev, err
	}
	deadline := time.Now().Add(3 * time.Second)
	quiet := 0
	for quiet < 2 && time.Now().Before(deadline) {
		if err := sleep(ctx, 100*time.Millisecond); err != nil {
			return prev, err
		}
		c, err := m.counters(ctx)
		if err != nil {
			return prev, err
		}
		if c.writes() == prev.writes() && c.InMsgs == prev.InMsgs {
			quiet++
		} else {
			quiet = 0
		}
		prev = c
	}
	return prev, nil
}
