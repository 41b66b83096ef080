//go:build unix

package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/jetgate/jetgate/client"
	"github.com/jetgate/jetgate/cmd/jetgate/app"
)

// sigtermHelperEnv makes TestSIGTERMHelper run a worker (in a child
// process of TestWorkerDrainsOnSIGTERM) against the jetgate at its value.
const sigtermHelperEnv = "JETGATE_CLIENT_SIGTERM_WORKER_URL"

// sigHelperIDEnv is the worker id the child process uses.
const sigHelperIDEnv = "JETGATE_CLIENT_SIGTERM_WORKER_ID"

// ojs-worker-protocol.md 9.2-9.4, issue 19: a worker process running Run
// drains on SIGTERM: it does not exit at once, fails the job still
// running at the end of its drain timeout with type "shutdown", and exits
// cleanly. The worker runs in a child process so the signal reaches only
// it.
func TestWorkerDrainsOnSIGTERM(t *testing.T) {
	t.Parallel()
	e := setup(t, "http", app.Config{}, client.Config{})
	ctx := ctxT(t)
	// The retry waits an hour, so the job stays retryable to be seen.
	j, err := e.c.Enqueue(ctx, "endless", nil, client.Queue("sigterm"),
		client.Retry(client.RetryPolicy{MaxAttempts: 3, InitialInterval: time.Hour, MaxInterval: time.Hour}))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestSIGTERMHelper$", "-test.count=1")
	workerID := "sig-worker-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	cmd.Env = append(os.Environ(), sigtermHelperEnv+"="+e.srv.URL(), sigHelperIDEnv+"="+workerID)
	out := &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	waitState(t, e.c, j.ID, "active", 30*time.Second)

	// 9.3 / 9.4: SIGTSTP quiets the worker (it reports quiet and fetches
	// nothing while two more heartbeats go by), SIGCONT resumes it.
	if err := cmd.Process.Signal(syscall.SIGTSTP); err != nil {
		t.Fatal(err)
	}
	var beat string
	eventually(t, 20*time.Second, "worker reports quiet", func() bool {
		st, at := registered(t, e.srv.URL(), workerID)
		beat = at
		return st == client.StateQuiet
	})
	waiting, err := e.c.Enqueue(ctx, "quick", nil, client.Queue("sigterm"))
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		eventually(t, 20*time.Second, "another heartbeat", func() bool {
			_, at := registered(t, e.srv.URL(), workerID)
			return at != beat
		})
		_, beat = registered(t, e.srv.URL(), workerID)
	}
	if g, _ := e.c.Get(ctx, waiting.ID); g.State != "available" {
		t.Fatalf("a quiet worker fetched a job (state %s)", g.State)
	}
	if err := cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	waitState(t, e.c, waiting.ID, "completed", 20*time.Second)

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("worker process after SIGTERM: %v\n%s", err, out.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("worker process still running 30 s after SIGTERM\n%s", out.String())
	}
	g := waitState(t, e.c, j.ID, "retryable", 10*time.Second)
	if g.Error == nil || g.Error.Kind() != "shutdown" {
		t.Fatalf("job error %+v, want type shutdown", g.Error)
	}
}

// TestSIGTERMHelper is the worker process of TestWorkerDrainsOnSIGTERM;
// it does nothing in a normal test run.
func TestSIGTERMHelper(t *testing.T) {
	url := os.Getenv(sigtermHelperEnv)
	if url == "" {
		t.Skip("helper process of TestWorkerDrainsOnSIGTERM")
	}
	c, err := client.New(client.Config{URL: url})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	w, err := c.NewWorker(client.WorkerConfig{Queues: []string{"sigterm"}, PollInterval: 50 * time.Millisecond,
		DrainTimeout: time.Second, HeartbeatInterval: 100 * time.Millisecond, WorkerID: os.Getenv(sigHelperIDEnv)})
	if err != nil {
		t.Fatal(err)
	}
	w.Handle("quick", func(context.Context, *client.Job) (any, error) { return nil, nil })
	w.Handle("endless", func(ctx context.Context, j *client.Job) (any, error) {
		<-ctx.Done()
		if !errors.Is(context.Cause(ctx), client.ErrShutdown) {
			t.Errorf("cause %v, want ErrShutdown", context.Cause(ctx))
		}
		return nil, ctx.Err()
	})
	if err := w.Run(context.Background()); err != nil {
		t.Fatalf("run: %v", err)
	}
}

// registered returns a worker's reported state and last heartbeat time
// from the admin API ("" before its first heartbeat).
func registered(t *testing.T, base, id string) (state, lastBeat string) {
	t.Helper()
	res, err := http.Get(base + "/ojs/v1/admin/workers/" + id)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode == http.StatusNotFound {
		return "", ""
	}
	var w struct {
		ReportedState   string `json:"reported_state"`
		LastHeartbeatAt string `json:"last_heartbeat_at"`
	}
	if err := json.NewDecoder(res.Body).Decode(&w); err != nil {
		t.Fatal(err)
	}
	return w.ReportedState, w.LastHeartbeatAt
}
