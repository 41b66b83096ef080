package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetgate/jetgate/jetstream/natstest"
	"github.com/jetgate/jetgate/jetstream/topology"
)

// Issue 31 item 6, as an operator meets it: a `jetgate serve` process
// with --shutdown-timeout 5s, a full block queue and producers waiting
// 25 s for room gets SIGTERM. Every producer is answered 503 with
// Retry-After before the process exits, the process exits cleanly within
// the shutdown timeout, and nothing was admitted for the producers (depth
// units, ready messages and job records as before them, no ticket left).
// The process is this test binary running main (TestMainProcess), on a
// NATS server of the test's, which outlives it and is read afterwards.
func TestServeSIGTERMAnswersBlockedProducers(t *testing.T) {
	t.Parallel()
	ns := natstest.RunServer(t)
	_, js := natstest.Connect(t, ns)
	cmd := exec.Command(os.Args[0], "-test.run=^TestMainProcess$")
	cmd.Env = append(os.Environ(), "JETGATE_TEST_MAIN=serve --nats-url "+ns.ClientURL()+
		" --http-addr 127.0.0.1:0 --queue-max-depth 1 --queue-overflow block --shutdown-timeout 5s --log-format json")
	stderr, logw := io.Pipe()
	cmd.Stderr = logw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() {
		err := cmd.Wait()
		logw.Close()
		exited <- err
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill() // if the test failed before it exited
		<-exited
	})
	base := servingURL(t, stderr)

	if a := postJob(base, 0, false); a.status != 201 {
		t.Fatalf("first enqueue: %+v", a)
	}
	before := heldIn(t, js)
	answers := make(chan answerOf, 3)
	for i := range 3 {
		go func() { answers <- postJob(base, i+1, true) }()
	}
	for deadline := time.Now().Add(20 * time.Second); heldIn(t, js).tickets != 3; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("producers not blocked: %+v", heldIn(t, js))
		}
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	signalled := time.Now()
	for range 3 {
		if a := <-answers; a.err != nil || a.status != 503 || a.retryAfter == "" {
			t.Errorf("blocked producer: %+v, want 503 with Retry-After", a)
		}
	}
	select {
	case err := <-exited:
		exited <- err // for the cleanup
		if err != nil {
			t.Fatalf("jetgate serve exited with %v after SIGTERM", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("jetgate serve still runs 30 s after SIGTERM")
	}
	if took := time.Since(signalled); took > 5*time.Second {
		t.Errorf("exited %s after SIGTERM, past --shutdown-timeout 5s", took)
	}
	if after := heldIn(t, js); after != before {
		t.Fatalf("after SIGTERM: %+v, before the producers came: %+v", after, before)
	}
}

// servingURL reads the process's JSON log until the "jetgate serving" line
// and returns its HTTP URL; the rest of the log is drained in the
// background.
func servingURL(t *testing.T, r io.Reader) string {
	t.Helper()
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			var rec struct{ Msg, HTTP string }
			if json.Unmarshal(sc.Bytes(), &rec) == nil && rec.Msg == "jetgate serving" {
				lines <- rec.HTTP
			}
		}
		close(lines)
	}()
	select {
	case url, ok := <-lines:
		if !ok {
			t.Fatal("jetgate serve ended before serving")
		}
		go func() {
			for range lines {
			}
		}()
		return url
	case <-time.After(60 * time.Second):
		t.Fatal("jetgate serve not serving within 60 s")
	}
	return ""
}

type answerOf struct {
	status     int
	retryAfter string
	err        error
}

// postJob enqueues a job into queue "full"; block asks to wait 25 s for
// room. It runs on goroutines of its own: no t.Fatal.
func postJob(base string, i int, block bool) answerOf {
	body := fmt.Sprintf(`{"type":"t.blocked","args":[%d],"options":{"queue":"full"}}`, i)
	req, err := http.NewRequest("POST", base+"/ojs/v1/jobs", strings.NewReader(body))
	if err != nil {
		return answerOf{err: err}
	}
	req.Header.Set("Content-Type", "application/openjobspec+json")
	if block {
		req.Header.Set("OJS-Block-Timeout", "25")
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return answerOf{err: err}
	}
	defer res.Body.Close()
	_, _ = io.Copy(io.Discard, res.Body)
	return answerOf{status: res.StatusCode, retryAfter: res.Header.Get("Retry-After")}
}

// queueHeld is what queue "full" holds in JetStream.
type queueHeld struct {
	units, ready, records, tickets uint64
}

func heldIn(t *testing.T, js jetstream.JetStream) queueHeld {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	count := func(stream, filter string) uint64 {
		st, err := js.Stream(ctx, stream)
		if err != nil {
			t.Fatalf("stream %s: %v", stream, err)
		}
		info, err := st.Info(ctx, jetstream.WithSubjectFilter(filter))
		if err != nil {
			t.Fatalf("stream %s: %v", stream, err)
		}
		var n uint64
		for _, c := range info.State.Subjects {
			n += c
		}
		return n
	}
	h := queueHeld{
		units: count(topology.DepthStream("full"), ">"),
		ready: count(topology.ReadyStream, fmt.Sprintf(topology.ReadyQueueFilterPattern, topology.Token("full"))),
	}
	if _, err := js.Stream(ctx, topology.BlockedStream); err == nil {
		h.tickets = count(topology.BlockedStream, topology.BlockedSubject("full"))
	}
	kv, err := js.KeyValue(ctx, topology.JobsBucket)
	if err != nil {
		t.Fatal(err)
	}
	st, err := kv.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	h.records = st.Values()
	return h
}
