package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetgate/jetgate/cmd/jetgate/app"
	"github.com/jetgate/jetgate/jetstream/natstest"
	"github.com/jetgate/jetgate/jetstream/topology"
)

// The lease of a job whose jetgate process is killed (kill -9) is
// enforced although nothing fetches its queue again (issue 31 item 1):
// the job becomes retryable, or discarded at its last attempt, within one
// ack wait of the ready consumers after its deadline. The processes run
// with --claim-ack-wait 3s and jobs with a 3 s visibility timeout, so a
// fetch defers its lease write by 1 s and the kill comes before it.

// crashAckWait and crashVisibility are the processes' --claim-ack-wait
// and the fetches' visibility timeout.
const (
	crashAckWait    = 3 * time.Second
	crashVisibility = 3 * time.Second
)

// The embedded default: the process dies with its NATS server, and is
// started again on the same data dir.
func TestKilledProcessLeaseEnforcedAfterRestart(t *testing.T) {
	t.Parallel()
	ports := freeTCPPorts(t, 2)
	base := "http://127.0.0.1:" + strconv.Itoa(ports[0])
	args := []string{"serve", "--data-dir", t.TempDir(), "--http-addr", "127.0.0.1:" + strconv.Itoa(ports[0]),
		"--nats-addr", "127.0.0.1:" + strconv.Itoa(ports[1])}
	p := startServeProc(t, "jetgate", args...)
	waitServeReady(t, p, base)
	jobs, fetched := fetchDoomed(t, base, "crash-embedded")
	killBeforeLeaseWrite(t, p, fetched)
	p = startServeProc(t, "jetgate-again", args...)
	waitServeReady(t, p, base)
	// Nothing runs the timers until the process is back: the bound counts
	// from then if that is after the deadline.
	checkFreed(t, base, jobs, fetched, time.Now())
}

// Two processes on one NATS, one killed: the other frees the job.
func TestKilledProcessLeaseEnforcedByAnother(t *testing.T) {
	t.Parallel()
	ns := natstest.RunServer(t)
	url := ns.ClientURL()
	ports := freeTCPPorts(t, 2)
	var bases []string
	var procs []*serveProc
	for i, port := range ports {
		base := "http://127.0.0.1:" + strconv.Itoa(port)
		p := startServeProc(t, fmt.Sprintf("jetgate%d", i+1), "serve", "--nats-url", url,
			"--http-addr", "127.0.0.1:"+strconv.Itoa(port))
		waitServeReady(t, p, base)
		bases, procs = append(bases, base), append(procs, p)
	}
	jobs, fetched := fetchDoomed(t, bases[0], "crash-two")
	killBeforeLeaseWrite(t, procs[0], fetched)
	checkFreed(t, bases[1], jobs, fetched, fetched)
}

// fetchDoomed enqueues two jobs on queue, one with attempts left and one
// at its last, fetches both, and returns their ids with the time the
// fetch was answered (their attempts started before it).
func fetchDoomed(t *testing.T, base, queue string) (map[string]string, time.Time) {
	t.Helper()
	want := map[string]string{}
	for attempts, state := range map[int]string{3: "retryable", 1: "discarded"} {
		var out struct{ Job struct{ ID string } }
		httpJSON(t, http.MethodPost, base+"/ojs/v1/jobs", fmt.Sprintf(
			`{"type":"crash.t","args":[],"queue":%q,"options":{"retry":{"max_attempts":%d,"initial_interval":"PT1M"}}}`,
			queue, attempts), http.StatusCreated, &out)
		want[out.Job.ID] = state
	}
	var got struct {
		Jobs []struct {
			ID, State string
		}
	}
	httpJSON(t, http.MethodPost, base+"/ojs/v1/workers/fetch", fmt.Sprintf(
		`{"queues":[%q],"count":2,"worker_id":"doomed","visibility_timeout_ms":%d}`, queue, crashVisibility.Milliseconds()),
		http.StatusOK, &got)
	fetched := time.Now()
	if len(got.Jobs) != 2 {
		t.Fatalf("fetched %d jobs, want 2: %+v", len(got.Jobs), got)
	}
	return want, fetched
}

// killBeforeLeaseWrite kills p (SIGKILL), and skips the test if that came
// so late after the fetch that p may have written the leases (a third of
// the ack wait after it): the test would prove nothing then.
func killBeforeLeaseWrite(t *testing.T, p *serveProc, fetched time.Time) {
	t.Helper()
	p.kill()
	if late := time.Since(fetched); late > crashAckWait/3*8/10 {
		t.Skipf("the machine is too slow: the kill came %s after the fetch, when the leases may be written", late)
	}
}

// checkFreed polls each job (never fetching) until it leaves active, and
// fails the test if one is not in the state want names by its deadline
// (fetched + the visibility timeout), or by back if a process ran again
// only later, plus one ack wait, plus a margin for a loaded machine.
func checkFreed(t *testing.T, base string, want map[string]string, fetched, back time.Time) {
	t.Helper()
	by := fetched.Add(crashVisibility)
	if back.After(by) {
		by = back
	}
	by = by.Add(crashAckWait + 10*time.Second)
	for id, state := range want {
		for {
			var out struct {
				Job struct {
					State string
					Error *struct{ Type string }
				}
			}
			httpJSON(t, http.MethodGet, base+"/ojs/v1/jobs/"+id, "", http.StatusOK, &out)
			if out.Job.State != "active" {
				if out.Job.State != state || out.Job.Error == nil || out.Job.Error.Type != "stalled" {
					t.Errorf("job %s of the killed process: %s %+v, want %s stalled", id, out.Job.State, out.Job.Error, state)
				}
				break
			}
			if time.Now().After(by) {
				t.Fatalf("job %s still active %s after its fetch: its lease was not enforced", id, time.Since(fetched).Round(time.Millisecond))
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// serveProc is a `jetgate serve` process: this test binary running main
// (TestMainProcess), killed with SIGKILL.
type serveProc struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	done    chan struct{}
}

func startServeProc(t *testing.T, name string, args ...string) *serveProc {
	t.Helper()
	// args[0] is the subcommand; flags given after the defaults win.
	args = append([]string{args[0], "--claim-ack-wait", crashAckWait.String(), "--log-level", "info", "--dashboard=false"}, args[1:]...)
	logPath := filepath.Join(t.TempDir(), name+".log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestMainProcess$")
	cmd.Env = append(os.Environ(), "JETGATE_TEST_MAIN="+strings.Join(args, " "))
	cmd.Stdout, cmd.Stderr = logf, logf
	setDeathSignal(cmd)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &serveProc{name: name, cmd: cmd, logPath: logPath, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		_ = logf.Close()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.kill()
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			lines := strings.Split(strings.TrimSpace(string(b)), "\n")
			t.Logf("%s log tail:\n%s", name, strings.Join(lines[max(0, len(lines)-40):], "\n"))
		}
	})
	return p
}

// kill sends SIGKILL and waits for the process to be gone.
func (p *serveProc) kill() {
	_ = p.cmd.Process.Kill()
	<-p.done
}

// waitServeReady polls /ready until 200.
func waitServeReady(t *testing.T, p *serveProc, base string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get(base + "/ready")
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		select {
		case <-p.done:
			t.Fatalf("%s exited while starting", p.name)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not ready after 60s: %v", p.name, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// httpJSON sends body (none if empty), wants status and decodes the
// answer into out.
func httpJSON(t *testing.T, method, url, body string, status int, out any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, url, bytes.NewBufferString(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	var raw json.RawMessage
	if err := json.NewDecoder(resp.Body).Decode(&raw); err != nil {
		t.Fatalf("%s %s: %d, body: %v", method, url, resp.StatusCode, err)
	}
	if resp.StatusCode != status {
		t.Fatalf("%s %s: %d %s, want %d", method, url, resp.StatusCode, raw, status)
	}
	if err := json.Unmarshal(raw, out); err != nil {
		t.Fatalf("%s %s: %v in %s", method, url, err, raw)
	}
}

// freeTCPPorts reserves n distinct loopback ports, then frees them for
// the processes.
func freeTCPPorts(t *testing.T, n int) []int {
	t.Helper()
	var ports []int
	var lns []net.Listener
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns = append(lns, ln)
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	for _, ln := range lns {
		_ = ln.Close()
	}
	return ports
}

// SIGTERM writes every lease a fetch deferred before the process exits
// (issue 31 item 1), and cancels the process's holder sentinel: with the
// default 30 s ack wait and visibility timeout, the fetches' leases were
// still deferred (10 s) when the signal came.
func TestSIGTERMWritesDeferredLeases(t *testing.T) {
	t.Parallel()
	ns := natstest.RunServer(t)
	port := freeTCPPorts(t, 1)[0]
	base := "http://127.0.0.1:" + strconv.Itoa(port)
	p := startServeProc(t, "jetgate", "serve", "--nats-url", ns.ClientURL(), "--http-addr", "127.0.0.1:"+strconv.Itoa(port),
		"--claim-ack-wait", "30s")
	waitServeReady(t, p, base)
	var ids []string
	for range 3 {
		var out struct{ Job struct{ ID string } }
		httpJSON(t, http.MethodPost, base+"/ojs/v1/jobs", `{"type":"term.t","args":[],"queue":"sigterm"}`, http.StatusCreated, &out)
		ids = append(ids, out.Job.ID)
	}
	var got struct{ Jobs []struct{ ID string } }
	httpJSON(t, http.MethodPost, base+"/ojs/v1/workers/fetch", `{"queues":["sigterm"],"count":3,"worker_id":"w"}`, http.StatusOK, &got)
	if len(got.Jobs) != 3 {
		t.Fatalf("fetched %d jobs, want 3", len(got.Jobs))
	}
	fetched := time.Now()
	_, js := natstest.Connect(t, ns)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	timers, err := js.Stream(ctx, topology.TimerStream)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if late := time.Since(fetched); late > 8*time.Second {
		t.Skipf("the machine is too slow: SIGTERM came %s after the fetch, when the leases may be written (10 s)", late)
	}
	select {
	case <-p.done:
	case <-time.After(60 * time.Second):
		t.Fatal("jetgate did not exit on SIGTERM")
	}
	for _, id := range ids {
		if _, err := timers.GetLastMsgForSubject(ctx, topology.TimerSchedule(topology.TimerLease, id)); err != nil {
			t.Errorf("lease of %s after SIGTERM: %v", id, err)
		}
	}
	info, err := timers.Info(ctx, jetstream.WithSubjectFilter(fmt.Sprintf(topology.TimerSchedulePattern, topology.TimerHolder, "*")))
	if err != nil {
		t.Fatal(err)
	}
	if n := len(info.State.Subjects); n != 0 {
		t.Errorf("%d holder sentinels left after SIGTERM, want 0 (%v)", n, info.State.Subjects)
	}
}

// An app.Config (the Go API) with a ClaimAckWait below 1s is refused at
// start, naming the flag and the minimum; the flag itself is checked with
// the others (serveRanges).
func TestClaimAckWaitMinimum(t *testing.T) {
	t.Parallel()
	s, err := app.Start(context.Background(), app.Config{DataDir: t.TempDir(), ClaimAckWait: 500 * time.Millisecond}, nil)
	if err == nil {
		_ = s.Shutdown(context.Background())
		t.Fatal("ClaimAckWait 500ms accepted")
	}
	if !strings.Contains(err.Error(), "--claim-ack-wait") || !strings.Contains(err.Error(), "at least 1s") {
		t.Fatalf("error %q names neither the flag nor its minimum", err)
	}
}
