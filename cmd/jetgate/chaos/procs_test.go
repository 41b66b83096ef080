package chaos

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// binaries are the two programs the suite runs as processes.
type binaries struct {
	jetgate, natsServer string
}

// buildBinaries builds jetgate (./cmd/jetgate) and nats-server (the module
// version go.mod requires, from the module cache) into a temp dir, unless
// JETGATE_CHAOS_BIN / JETGATE_CHAOS_NATS_BIN name ready ones.
// JETGATE_CHAOS_RACE=1 builds jetgate with the race detector.
func buildBinaries(t *testing.T) binaries {
	t.Helper()
	dir := t.TempDir()
	b := binaries{
		jetgate:    os.Getenv("JETGATE_CHAOS_BIN"),
		natsServer: os.Getenv("JETGATE_CHAOS_NATS_BIN"),
	}
	if b.jetgate == "" {
		b.jetgate = filepath.Join(dir, "jetgate")
		args := []string{"build", "-o", b.jetgate}
		if os.Getenv("JETGATE_CHAOS_RACE") == "1" {
			args = append(args, "-race")
		}
		goBuild(t, append(args, "github.com/jetgate/jetgate/cmd/jetgate")...)
	}
	if b.natsServer == "" {
		b.natsServer = filepath.Join(dir, "nats-server")
		goBuild(t, "build", "-o", b.natsServer, "github.com/nats-io/nats-server/v2")
	}
	return b
}

func goBuild(t *testing.T, args ...string) {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	cmd := exec.Command(goBin, args...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// freePorts reserves n distinct loopback ports (listening on all of them at
// once so none repeats), then frees them for the processes.
func freePorts(t *testing.T, n int) []int {
	t.Helper()
	ports := make([]int, n)
	lns := make([]net.Listener, n)
	for i := range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("free port: %v", err)
		}
		lns[i] = ln
		ports[i] = ln.Addr().(*net.TCPAddr).Port
	}
	for _, ln := range lns {
		_ = ln.Close()
	}
	return ports
}

// proc is one child process the suite starts, kills with SIGKILL and starts
// again with the same arguments. Its output goes to logPath (appended across
// restarts). An exit the suite did not cause is recorded in unexpected.
type proc struct {
	name    string
	bin     string
	args    []string
	logPath string

	mu         sync.Mutex
	cmd        *exec.Cmd
	done       chan struct{}
	killing    bool
	unexpected []string
}

func (p *proc) start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil {
		return fmt.Errorf("%s: already running", p.name)
	}
	logf, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	fmt.Fprintf(logf, "=== chaos: start %s at %s\n", p.name, stamp(time.Now()))
	cmd := exec.Command(p.bin, p.args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	setDeathSignal(cmd)
	if err := cmd.Start(); err != nil {
		_ = logf.Close()
		return fmt.Errorf("start %s: %w", p.name, err)
	}
	done := make(chan struct{})
	p.cmd, p.done, p.killing = cmd, done, false
	go func() {
		err := cmd.Wait()
		_ = logf.Close()
		p.mu.Lock()
		if !p.killing {
			p.unexpected = append(p.unexpected, fmt.Sprintf("%s exited on its own at %s: %v (log %s)",
				p.name, stamp(time.Now()), err, p.logPath))
		}
		p.cmd = nil
		p.mu.Unlock()
		close(done)
	}()
	return nil
}

// kill sends SIGKILL (kill -9) and waits for the process to be gone.
func (p *proc) kill() {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	if cmd == nil {
		p.mu.Unlock()
		return
	}
	p.killing = true
	_ = cmd.Process.Kill()
	p.mu.Unlock()
	<-done
}

func (p *proc) running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmd != nil
}

func (p *proc) takeUnexpected() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	u := p.unexpected
	p.unexpected = nil
	return u
}

// logTail is the end of the process's log, for failure messages.
func (p *proc) logTail(n int) string {
	b, err := os.ReadFile(p.logPath)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// cluster is the 3 NATS nodes and 3 jetgate processes of a run.
type cluster struct {
	nats     []*proc
	natsMon  []string // http://127.0.0.1:<monitor port>
	natsURLs []string
	jetgates []*proc
	baseURLs []string // http://127.0.0.1:<http port>
}

// startCluster starts a 3-node JetStream cluster (file storage) and 3
// jetgate processes with --replicas 3 on it, and waits until every jetgate
// answers /ready.
func startCluster(ctx context.Context, t *testing.T, bins binaries, jetgateArgs []string) *cluster {
	t.Helper()
	dir := t.TempDir()
	logDir := dir
	if d := os.Getenv("JETGATE_CHAOS_LOGDIR"); d != "" {
		logDir = d
		if err := os.MkdirAll(logDir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	began := time.Now()
	ports := freePorts(t, 12)
	c := &cluster{}
	var routes []string
	for i := range 3 {
		routes = append(routes, fmt.Sprintf("nats-route://127.0.0.1:%d", ports[3+i]))
		c.natsURLs = append(c.natsURLs, fmt.Sprintf("nats://127.0.0.1:%d", ports[i]))
	}
	for i := range 3 {
		name := fmt.Sprintf("n%d", i+1)
		store := filepath.Join(dir, name)
		conf := filepath.Join(dir, name+".conf")
		text := fmt.Sprintf(`server_name: %q
listen: "127.0.0.1:%d"
http: "127.0.0.1:%d"
jetstream { store_dir: %q, max_memory_store: 268435456, max_file_store: 4294967296 }
cluster { name: "chaos", listen: "127.0.0.1:%d", routes: [%s] }
`, name, ports[i], ports[6+i], store, ports[3+i], `"`+strings.Join(routes, `", "`)+`"`)
		if err := os.WriteFile(conf, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		p := &proc{name: "nats " + name, bin: bins.natsServer, args: []string{"-c", conf},
			logPath: filepath.Join(logDir, name+".log")}
		c.nats = append(c.nats, p)
		c.natsMon = append(c.natsMon, fmt.Sprintf("http://127.0.0.1:%d", ports[6+i]))
	}
	t.Cleanup(c.stopAll)
	for _, p := range c.nats {
		if err := p.start(); err != nil {
			t.Fatal(err)
		}
	}
	for i := range c.nats {
		if err := c.waitNATSHealthy(ctx, i, 90*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 3 {
		name := fmt.Sprintf("jg%d", i+1)
		args := append([]string{"serve",
			"--http-addr", fmt.Sprintf("127.0.0.1:%d", ports[9+i]),
			"--nats-url", strings.Join(c.natsURLs, ","),
			"--replicas", "3",
			"--instance-name", name,
		}, jetgateArgs...)
		p := &proc{name: name, bin: bins.jetgate, args: args, logPath: filepath.Join(logDir, name+".log")}
		c.jetgates = append(c.jetgates, p)
		c.baseURLs = append(c.baseURLs, fmt.Sprintf("http://127.0.0.1:%d", ports[9+i]))
	}
	// The first process creates the streams and buckets; the others find them.
	for i, p := range c.jetgates {
		if err := p.start(); err != nil {
			t.Fatal(err)
		}
		if err := c.waitJetgateReady(ctx, i, 120*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("cluster up in %s: nats %s, jetgate %s, logs in %s", time.Since(began).Round(100*time.Millisecond),
		strings.Join(c.natsURLs, ","), strings.Join(c.baseURLs, ","), logDir)
	return c
}

func (c *cluster) stopAll() {
	for _, p := range c.jetgates {
		p.kill()
	}
	for _, p := range c.nats {
		p.kill()
	}
}

// waitNATSHealthy polls the node's /healthz (JetStream current) until 200.
func (c *cluster) waitNATSHealthy(ctx context.Context, i int, limit time.Duration) error {
	return pollOK(ctx, c.natsMon[i]+"/healthz", limit, c.nats[i])
}

// waitJetgateReady polls the process's /ready until 200.
func (c *cluster) waitJetgateReady(ctx context.Context, i int, limit time.Duration) error {
	return pollOK(ctx, c.baseURLs[i]+"/ready", limit, c.jetgates[i])
}

var probeClient = &http.Client{Timeout: 3 * time.Second}

func pollOK(ctx context.Context, url string, limit time.Duration, p *proc) error {
	deadline := time.Now().Add(limit)
	last := "no answer"
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := probeClient.Do(req)
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = resp.Status
		} else {
			last = err.Error()
		}
		if !p.running() {
			return fmt.Errorf("%s is not running while waiting for %s; log tail:\n%s", p.name, url, p.logTail(30))
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: %s not OK after %s (last: %s); log tail:\n%s", p.name, url, limit, last, p.logTail(30))
		}
		select {
		case <-ctx.Done():
			return errors.Join(ctx.Err(), fmt.Errorf("%s: waiting for %s", p.name, url))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// stamp formats a time of the records: UTC with microseconds.
func stamp(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("15:04:05.000000")
}
