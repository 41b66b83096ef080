package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetgate/jetgate/jetstream/topology"
)

// servedJetgate is `jetgate serve` run as a process of its own (this test
// binary, through TestMainProcess) on a data dir that outlives it.
type servedJetgate struct {
	t        *testing.T
	args     string
	log      string
	base     string
	natsAddr string
	cmd      *exec.Cmd
}

// startServed starts `jetgate serve` (and extra flags) as a process on a
// fresh data dir and free ports, killed at the end of the test.
func startServed(t *testing.T, extra string) *servedJetgate {
	t.Helper()
	dir := t.TempDir()
	httpPort, natsPort := freePort(t), freePort(t)
	j := &servedJetgate{t: t, log: filepath.Join(dir, "jetgate.log"), base: fmt.Sprintf("http://127.0.0.1:%d", httpPort),
		natsAddr: fmt.Sprintf("127.0.0.1:%d", natsPort),
		args: strings.TrimSpace(fmt.Sprintf("serve --data-dir %s --http-addr 127.0.0.1:%d --nats-addr 127.0.0.1:%d %s",
			filepath.Join(dir, "data"), httpPort, natsPort, extra))}
	t.Cleanup(j.kill)
	j.start()
	return j
}

func (j *servedJetgate) start() {
	j.t.Helper()
	logf, err := os.OpenFile(j.log, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		j.t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestMainProcess$")
	cmd.Env = append(os.Environ(), "JETGATE_TEST_MAIN="+j.args)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		j.t.Fatal(err)
	}
	_ = logf.Close()
	j.cmd = cmd
	deadline := time.Now().Add(60 * time.Second)
	for {
		res, err := http.Get(j.base + "/ready")
		if err == nil {
			_ = res.Body.Close()
			if res.StatusCode == 200 {
				return
			}
		}
		if time.Now().After(deadline) {
			j.t.Fatalf("jetgate not ready after 60 s: %v\n%s", err, j.logTail())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// kill is kill -9.
func (j *servedJetgate) kill() {
	if j.cmd == nil {
		return
	}
	_ = j.cmd.Process.Signal(syscall.SIGKILL)
	_ = j.cmd.Wait()
	j.cmd = nil
}

func (j *servedJetgate) logTail() string {
	b, _ := os.ReadFile(j.log)
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// call sends a JSON request and decodes a JSON answer into out (if set).
func (j *servedJetgate) call(method, path string, body, out any) (int, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, j.base+path, rd)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/openjobspec+json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		return res.StatusCode, err
	}
	if out != nil && len(raw) > 0 {
		if err := json.Unmarshal(raw, out); err != nil {
			return res.StatusCode, fmt.Errorf("%s %s: %s: %w", method, path, raw, err)
		}
	}
	return res.StatusCode, nil
}

func (j *servedJetgate) must(method, path string, body, out any) {
	j.t.Helper()
	status, err := j.call(method, path, body, out)
	if err != nil || status/100 != 2 {
		j.t.Fatalf("%s %s: %d %v", method, path, status, err)
	}
}

// listed counts the jobs of queue in state that the admin listing finds:
// available ones from the ready stream, each checked against its record,
// others from the records. It reads no counter.
func (j *servedJetgate) listed(queue, state string) int64 {
	j.t.Helper()
	var n int64
	cursor := ""
	for {
		q := url.Values{"queue": {queue}, "state": {state}, "per_page": {"100"}}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		var page struct {
			Items      []json.RawMessage `json:"items"`
			Pagination struct {
				HasMore    bool   `json:"has_more"`
				NextCursor string `json:"next_cursor"`
			} `json:"pagination"`
		}
		j.must("GET", "/ojs/v1/admin/jobs?"+q.Encode(), nil, &page)
		n += int64(len(page.Items))
		if !page.Pagination.HasMore {
			return n
		}
		cursor = page.Pagination.NextCursor
	}
}

// numbers are a queue's depth as each reader shows it.
type numbers struct {
	stats    map[string]int64 // GET /ojs/v1/queues/{q}/stats
	byPrio   int64            // GET /ojs/v1/queues/{q}/priority-stats, total
	metric   map[string]int64 // ojs_queue_depth{queue=q}
	admin    map[string]int64 // GET /ojs/v1/admin/queues/{q}
	snapshot map[string]int64 // GET /dashboard/snapshot, the queue's row
}

func (j *servedJetgate) numbers(queue string) (numbers, error) {
	n := numbers{stats: map[string]int64{}, metric: map[string]int64{}}
	var st struct {
		Stats map[string]any `json:"stats"`
	}
	if _, err := j.call("GET", "/ojs/v1/queues/"+queue+"/stats", nil, &st); err != nil {
		return n, err
	}
	for _, k := range []string{"available", "scheduled", "active", "retryable", "pending"} {
		v, _ := st.Stats[k].(float64)
		n.stats[k] = int64(v)
	}
	var ps struct {
		Total int64 `json:"total"`
	}
	if _, err := j.call("GET", "/ojs/v1/queues/"+queue+"/priority-stats", nil, &ps); err != nil {
		return n, err
	}
	n.byPrio = ps.Total
	var aq struct {
		Counts map[string]int64 `json:"counts"`
	}
	if _, err := j.call("GET", "/ojs/v1/admin/queues/"+queue, nil, &aq); err != nil {
		return n, err
	}
	n.admin = aq.Counts
	var snap struct {
		Queues []struct {
			Name   string           `json:"name"`
			Counts map[string]int64 `json:"counts"`
		} `json:"queues"`
	}
	if _, err := j.call("GET", "/dashboard/snapshot", nil, &snap); err != nil {
		return n, err
	}
	for _, q := range snap.Queues {
		if q.Name == queue {
			n.snapshot = q.Counts
		}
	}
	res, err := http.Get(j.base + "/metrics")
	if err != nil {
		return n, err
	}
	defer res.Body.Close()
	prefix := fmt.Sprintf(`ojs_queue_depth{queue=%q,state="`, queue)
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), prefix)
		if !ok {
			continue
		}
		state, val, _ := strings.Cut(rest, `"} `)
		v, err := strconv.ParseFloat(val, 64)
		if err != nil {
			return n, fmt.Errorf("metric line %q: %w", sc.Text(), err)
		}
		n.metric[state] = int64(v)
	}
	return n, sc.Err()
}

// check compares every reader's numbers with want; it returns what
// differs, and fails the test at once on a number below zero.
func (n numbers) check(t *testing.T, want map[string]int64) string {
	t.Helper()
	for name, m := range map[string]map[string]int64{"stats": n.stats, "metric": n.metric, "admin": n.admin, "dashboard": n.snapshot} {
		for st, v := range m {
			if v < 0 {
				t.Fatalf("%s: %d jobs %s, below zero", name, v, st)
			}
		}
		for st, v := range want {
			if m[st] != v {
				return fmt.Sprintf("%s: %s %d, want %d (all: %+v)", name, st, m[st], v, n)
			}
		}
	}
	if n.byPrio != want["available"] {
		return fmt.Sprintf("priority stats: total %d, want %d", n.byPrio, want["available"])
	}
	return ""
}

// killMidEnqueue has producers enqueue on queue, each job's args tag
// followed by the producer and its count, until n more jobs are answered
// 201 (counted in created); then it kills jetgate under them and waits
// for the producers to stop.
func (j *servedJetgate) killMidEnqueue(queue string, producers int, n int64, created *atomic.Int64, tag ...any) {
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for p := range producers {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				args := append(append([]any{}, tag...), p, i)
				status, err := j.call("POST", "/ojs/v1/jobs",
					map[string]any{"type": "k.t", "args": args, "queue": queue, "priority": 1 + 2*(i%2)}, nil)
				if err != nil {
					return // the process is gone
				}
				if status == 201 {
					created.Add(1)
				}
			}
		})
	}
	for at := created.Load(); created.Load() < at+n; {
		time.Sleep(5 * time.Millisecond)
	}
	j.kill()
	close(stop)
	wg.Wait()
}

// waitNumbers waits until every reader of queue's depth shows want, and
// fails the test (its message begun with what) if one does not within
// 10 s.
func (j *servedJetgate) waitNumbers(queue string, want map[string]int64, what string) {
	j.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		n, err := j.numbers(queue)
		if err != nil {
			j.t.Fatal(err)
		}
		diff := n.check(j.t, want)
		if diff == "" {
			return
		}
		if time.Now().After(deadline) {
			j.t.Fatalf("%safter 10 s: %s", what, diff)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// Issue 31 item 2: jetgate killed with kill -9 while producers enqueue.
// Restarted on the same data dir, every reader of queue depth (queue
// stats, priority stats, the admin queue, the ojs_queue_depth metric, the
// dashboard) shows the truth within 10 s: the jobs the admin listing finds
// available in the ready stream, and scheduled and active in the records.
// No number is ever below zero, the jobs enqueued afterwards all count,
// and a fetch of everything returns what was counted.
func TestCountsAfterKill9MidEnqueue(t *testing.T) {
	if testing.Short() {
		t.Skip("starts jetgate as a process")
	}
	t.Parallel()
	j := startServed(t, "")

	const q = "killq"
	at := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	for i := range 3 {
		j.must("POST", "/ojs/v1/jobs", map[string]any{"type": "k.t", "args": []any{i}, "queue": q, "scheduled_at": at}, nil)
	}
	for i := range 4 {
		j.must("POST", "/ojs/v1/jobs", map[string]any{"type": "k.t", "args": []any{i}, "queue": q}, nil)
	}
	// Two jobs run. A visibility timeout under the ready consumers'
	// AckWait (30 s) writes the lease at once: no claim holds a ready
	// message across the kill (see stats.go for one that does).
	j.must("POST", "/ojs/v1/workers/fetch", map[string]any{"queues": []string{q}, "count": 2, "visibility_timeout_ms": 29000}, nil)

	// Producers enqueue until the kill; jobs answered 201 are counted.
	var created atomic.Int64
	j.killMidEnqueue(q, 4, 60, &created)

	j.start()
	truth := map[string]int64{"available": j.listed(q, "available"), "scheduled": j.listed(q, "scheduled"),
		"active": j.listed(q, "active")}
	if truth["available"] < 2+created.Load() || truth["scheduled"] != 3 || truth["active"] != 2 {
		t.Fatalf("listed after the restart %v; want at least %d available (answered 201), 3 scheduled, 2 active",
			truth, 2+created.Load())
	}
	j.waitNumbers(q, truth, "")

	for i := range 3 {
		j.must("POST", "/ojs/v1/jobs", map[string]any{"type": "k.t", "args": []any{"after", i}, "queue": q}, nil)
	}
	truth["available"] += 3
	j.waitNumbers(q, truth, "")

	var got int64
	for {
		var res struct {
			Jobs []json.RawMessage `json:"jobs"`
		}
		j.must("POST", "/ojs/v1/workers/fetch", map[string]any{"queues": []string{q}, "count": 500, "visibility_timeout_ms": 29000}, &res)
		if len(res.Jobs) == 0 {
			break
		}
		got += int64(len(res.Jobs))
	}
	if got != truth["available"] {
		t.Fatalf("fetched %d jobs, counted %d available", got, truth["available"])
	}
	truth["active"] += got
	truth["available"] = 0
	j.waitNumbers(q, truth, "")
}

// Issue 31 item 2, a claim that holds its ready message: jetgate killed
// with kill -9 right after a fetch whose visibility timeout (10 minutes)
// defers the leases, so each claim still holds the ready message it was
// claimed from (admission/lease.go). Those messages stay in the ready
// stream, unacknowledged, until the holder sentinel of the dead process
// fires and its walk writes the leases (about ClaimAckWait + 8 s after the
// kill). Before, they counted as available from 10 s after the claim
// until then; now every reader shows the truth within 10 s of the kill and
// keeps showing it through the walk and after.
func TestCountsAfterKill9HoldingClaims(t *testing.T) {
	if testing.Short() {
		t.Skip("starts jetgate as a process; waits for the ready consumers' AckWait (30 s)")
	}
	t.Parallel()
	j := startServed(t, "")

	const q = "holdq"
	at := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	for i := range 2 {
		j.must("POST", "/ojs/v1/jobs", map[string]any{"type": "k.t", "args": []any{i}, "queue": q, "scheduled_at": at}, nil)
	}
	for i := range 7 {
		j.must("POST", "/ojs/v1/jobs", map[string]any{"type": "k.t", "args": []any{i}, "queue": q, "priority": i % 2}, nil)
	}
	var res struct {
		Jobs []json.RawMessage `json:"jobs"`
	}
	j.must("POST", "/ojs/v1/workers/fetch", map[string]any{"queues": []string{q}, "count": 4, "visibility_timeout_ms": 600000}, &res)
	if len(res.Jobs) != 4 {
		t.Fatalf("fetched %d jobs, want 4", len(res.Jobs))
	}
	j.kill()
	killed := time.Now()

	j.start()
	restarted := time.Now()
	truth := map[string]int64{"available": j.listed(q, "available"), "scheduled": j.listed(q, "scheduled"),
		"active": j.listed(q, "active")}
	if want := map[string]int64{"available": 3, "scheduled": 2, "active": 4}; fmt.Sprint(truth) != fmt.Sprint(want) {
		t.Fatalf("listed after the restart %v, want %v", truth, want)
	}

	// Within 10 s of the kill (of the restart, on a machine slow to start
	// one), every reader shows the truth.
	deadline := killed.Add(10 * time.Second)
	if d := restarted.Add(10 * time.Second); d.After(deadline) {
		deadline = d
	}
	for {
		n, err := j.numbers(q)
		if err != nil {
			t.Fatal(err)
		}
		diff := n.check(t, truth)
		if diff == "" && time.Since(killed) >= 10*time.Second {
			break
		}
		if diff != "" && time.Now().After(deadline) {
			t.Fatalf("%s after the kill: %s", time.Since(killed).Round(time.Millisecond), diff)
		}
		time.Sleep(100 * time.Millisecond)
	}

	// And it stays the truth: through the AckWait, the sentinel's walk
	// (which writes the leases and acks the held messages) and after. A
	// reading may cross an ack (the held count and the ready stream read
	// a moment apart), so a difference must be gone within 1.5 s.
	walked := func() bool {
		b, _ := os.ReadFile(j.log)
		return bytes.Contains(b, []byte("leases of a stopped process secured"))
	}
	end := time.Time{}
	var wrongSince time.Time
	for end.IsZero() || time.Now().Before(end) || !wrongSince.IsZero() {
		if end.IsZero() && walked() {
			end = time.Now().Add(3 * time.Second)
		}
		if end.IsZero() && time.Since(killed) > 120*time.Second {
			t.Fatalf("the dead process's holder sentinel was not walked within 120 s:\n%s", j.logTail())
		}
		n, err := j.numbers(q)
		if err != nil {
			t.Fatal(err)
		}
		switch diff := n.check(t, truth); {
		case diff == "":
			wrongSince = time.Time{}
		case wrongSince.IsZero():
			wrongSince = time.Now()
		case time.Since(wrongSince) > 1500*time.Millisecond:
			t.Fatalf("%s after the kill, wrong for %s: %s", time.Since(killed).Round(time.Millisecond),
				time.Since(wrongSince).Round(time.Millisecond), diff)
		}
		time.Sleep(200 * time.Millisecond)
	}
	// The held jobs are active, not available: a fetch gets the 3 others.
	j.must("POST", "/ojs/v1/workers/fetch", map[string]any{"queues": []string{q}, "count": 10, "visibility_timeout_ms": 29000}, &res)
	if len(res.Jobs) != 3 {
		t.Fatalf("fetched %d jobs after the walk, want the 3 available", len(res.Jobs))
	}
}

// readyLeft counts the ready messages of queue in the ready stream of the
// embedded server listening on natsAddr, jobs and orphans alike.
func readyLeft(t *testing.T, natsAddr, queue string) int64 {
	t.Helper()
	nc, err := nats.Connect("nats://" + natsAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := js.Stream(ctx, topology.ReadyStream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx, jetstream.WithSubjectFilter(topology.ReadyQueueFilter(queue)))
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, c := range info.State.Subjects {
		n += int64(c)
	}
	return n
}

// Issue 31 item 2, a bounded queue: jetgate (every queue bounded by
// --queue-max-depth) killed with kill -9 while producers enqueue, and
// started again; a few rounds, until a kill has landed between a job's
// ready message and its record (the message of an enqueue answered with
// nothing, whose token matches no record). Such a message is no job: the
// truth is the jobs the admin listing finds available (checked against
// their records), all of them answered 201 or found since. Every reader
// shows it within 10 s of the restart, never below zero, though nobody
// fetches; before, the orphans counted available until a fetch met them,
// for good while nobody fetched. The in-process test that makes orphans
// on purpose is admission's TestCountsLeaveOutReadyMessagesWithoutARecord.
func TestCountsAfterKill9MidBoundedEnqueue(t *testing.T) {
	if testing.Short() {
		t.Skip("starts jetgate as a process")
	}
	t.Parallel()
	j := startServed(t, "--queue-max-depth 100000")
	natsAddr := j.natsAddr

	const q = "boundkillq"
	var created atomic.Int64
	var orphans int64
	for round := 0; round < 4 && orphans == 0; round++ {
		j.killMidEnqueue(q, 12, 80, &created, round)

		j.start()
		truth := map[string]int64{"available": j.listed(q, "available"), "scheduled": 0, "active": 0}
		if truth["available"] < created.Load() {
			t.Fatalf("round %d: %d listed available after the restart; want at least %d (answered 201)",
				round, truth["available"], created.Load())
		}
		orphans = readyLeft(t, natsAddr, q) - truth["available"]
		t.Logf("round %d: %d jobs answered 201, %d available, %d ready messages without a job", round,
			created.Load(), truth["available"], orphans)
		j.waitNumbers(q, truth, fmt.Sprintf("round %d, with %d orphans, ", round, orphans))
	}
	if orphans == 0 {
		t.Log("no kill landed between a ready message and its record: the numbers were checked without orphans")
	}
}
