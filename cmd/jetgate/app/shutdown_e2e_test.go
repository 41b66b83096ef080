package app_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetgate/jetgate/cmd/jetgate/app"
	"github.com/jetgate/jetgate/jetstream/natstest"
	"github.com/jetgate/jetgate/jetstream/topology"
)

// Issue 31 item 6: at shutdown, producers blocked on a full block queue
// get 503 with Retry-After (over NATS, the same error reply) within the
// shutdown timeout, while the server still answers, instead of waiting
// out their block timeout (25 s here) or getting no answer; and nothing
// was admitted for them: the queue's depth units, ready messages and job
// records are what they were before they came, and no ticket of theirs is
// left in the line. Both ways a server stops: Shutdown (an in-process
// stop) and Wait's cancelled context (what SIGTERM does in jetgate
// serve). jetgate runs on a NATS server of the test's, so that what is
// left in JetStream can be read after jetgate is gone.
func TestShutdownAnswersBlockedProducers(t *testing.T) {
	t.Parallel()
	const shutdownTimeout = 10 * time.Second
	for _, how := range []string{"Shutdown", "Wait"} {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			ns := natstest.RunServer(t)
			nc, js := natstest.Connect(t, ns)
			s := startApp(t, app.Config{NatsURL: ns.ClientURL(), QueueMaxDepth: 1, QueueOverflow: "block",
				ShutdownTimeout: shutdownTimeout})
			c := client{t: t, base: s.URL()}
			c.must(201, "POST", "/ojs/v1/jobs", blockedJob(0))
			before := jobsHeld(t, js, "full")

			answers := make(chan blockedAnswer, 5)
			for i := range 3 {
				go func() { answers <- enqueueBlockedHTTP(s.URL(), blockedJob(i+1)) }()
			}
			for i := range 2 {
				go func() { answers <- enqueueBlockedNATS(nc, blockedJob(i+10)) }()
			}
			eventually(t, 20*time.Second, "5 producers blocked", func() bool { return ticketsOf(t, js, "full") == 5 })

			begun := time.Now()
			stopped := make(chan error, 1)
			switch how {
			case "Shutdown":
				go func() {
					ctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
					defer cancel()
					stopped <- s.Shutdown(ctx)
				}()
			case "Wait":
				ctx, cancel := context.WithCancel(context.Background())
				go func() { stopped <- s.Wait(ctx) }()
				cancel() // as SIGTERM cancels jetgate serve's context
			}
			for range 5 {
				a := <-answers
				if a.err != nil || a.status != 503 || a.retryAfter == "" || a.code != "backend_error" {
					t.Errorf("%s producer: %+v, want 503 backend_error with Retry-After", a.binding, a)
				}
			}
			if err := <-stopped; err != nil {
				t.Fatalf("%s: %v", how, err)
			}
			if took := time.Since(begun); took > shutdownTimeout {
				t.Fatalf("stopped %s after the signal, past the shutdown timeout %s", took, shutdownTimeout)
			}
			if after := jobsHeld(t, js, "full"); after != before {
				t.Fatalf("after the shutdown: %+v, before the producers came: %+v", after, before)
			}
			if n := ticketsOf(t, js, "full"); n != 0 {
				t.Fatalf("%d tickets of blocked producers left in the line", n)
			}
		})
	}
}

func blockedJob(i int) map[string]any {
	return map[string]any{"type": "t.blocked", "args": []any{i}, "options": map[string]any{"queue": "full"}}
}

// blockedAnswer is the answer a blocked producer got.
type blockedAnswer struct {
	binding          string
	status           int
	code, retryAfter string
	err              error
}

// enqueueBlockedHTTP enqueues job asking to wait 25 s for room (it runs on
// a goroutine of its own: no t.Fatal).
func enqueueBlockedHTTP(base string, job map[string]any) blockedAnswer {
	a := blockedAnswer{binding: "HTTP"}
	body, _ := json.Marshal(job)
	req, err := http.NewRequest("POST", base+"/ojs/v1/jobs", bytes.NewReader(body))
	if err != nil {
		a.err = err
		return a
	}
	req.Header.Set("Content-Type", "application/openjobspec+json")
	req.Header.Set("OJS-Block-Timeout", "25")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		a.err = err
		return a
	}
	defer res.Body.Close()
	var env struct {
		Error struct{ Code string } `json:"error"`
	}
	a.err = json.NewDecoder(res.Body).Decode(&env)
	a.status, a.code, a.retryAfter = res.StatusCode, env.Error.Code, res.Header.Get("Retry-After")
	return a
}

// enqueueBlockedNATS is enqueueBlockedHTTP over the NATS micro service.
func enqueueBlockedNATS(nc *nats.Conn, job map[string]any) blockedAnswer {
	a := blockedAnswer{binding: "NATS"}
	m := nats.NewMsg("ojs.v1.jobs.enqueue")
	m.Data, _ = json.Marshal(job)
	m.Header.Set("OJS-Block-Timeout", "25")
	res, err := nc.RequestMsg(m, 40*time.Second)
	if err != nil {
		a.err = err
		return a
	}
	_, a.err = fmt.Sscan(res.Header.Get("Nats-Service-Error-Code"), &a.status)
	a.code, a.retryAfter = res.Header.Get("Nats-Service-Error"), res.Header.Get("Retry-After")
	return a
}

// held is what a queue holds in JetStream: depth units, ready messages
// (an available job's record) and job records.
type held struct {
	units, ready, records uint64
}

func jobsHeld(t *testing.T, js jetstream.JetStream, queue string) held {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var h held
	depth, err := js.Stream(ctx, topology.DepthStream(queue))
	must(t, err)
	info, err := depth.Info(ctx)
	must(t, err)
	h.units = info.State.Msgs
	ready, err := js.Stream(ctx, topology.ReadyStream)
	must(t, err)
	info, err = ready.Info(ctx, jetstream.WithSubjectFilter(fmt.Sprintf(topology.ReadyQueueFilterPattern, topology.Token(queue))))
	must(t, err)
	for _, n := range info.State.Subjects {
		h.ready += n
	}
	kv, err := js.KeyValue(ctx, topology.JobsBucket)
	must(t, err)
	st, err := kv.Status(ctx)
	must(t, err)
	h.records = st.Values()
	return h
}

// ticketsOf is the number of tickets in queue's line of blocked producers.
func ticketsOf(t *testing.T, js jetstream.JetStream, queue string) uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := js.Stream(ctx, topology.BlockedStream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return 0
	}
	must(t, err)
	info, err := st.Info(ctx, jetstream.WithSubjectFilter(topology.BlockedSubject(queue)))
	must(t, err)
	return info.State.Subjects[topology.BlockedSubject(queue)]
}
