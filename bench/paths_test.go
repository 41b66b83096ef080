package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetgate/jetgate/admission/ojs"
	"github.com/jetgate/jetgate/cmd/jetgate/app"
)

// Raw baseline assets, on the same embedded server as jetgate's.
const (
	rawStream  = "BENCH_RAW"
	rawSubject = "bench.raw.%d" // one subject (and consumer) per run
	// payloadSize is the raw message size, about a small job's.
	payloadSize = 200
)

// env is one jetgate server and the clients the paths use against it.
type env struct {
	srv   *app.Server
	nc    *nats.Conn // raw baseline connection, as jetgate has one
	js    jetstream.JetStream
	async jetstream.JetStream // pipelined publishes
	raw   jetstream.Stream
	http  *http.Client
}

// setup starts jetgate, connects the raw baseline and creates its stream.
func setup(tb testing.TB, sh shape) *env {
	tb.Helper()
	e := &env{srv: startJetgate(tb)}
	nc, err := nats.Connect(e.srv.NatsURL(), nats.Name("bench raw baseline"))
	if err != nil {
		tb.Fatalf("connect raw baseline: %v", err)
	}
	tb.Cleanup(nc.Close)
	e.nc = nc
	if e.js, err = jetstream.New(nc); err != nil {
		tb.Fatal(err)
	}
	if e.async, err = jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(4096)); err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	e.raw, err = e.js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name:      rawStream,
		Subjects:  []string{"bench.raw.>"},
		Retention: jetstream.WorkQueuePolicy,
		Storage:   jetstream.FileStorage,
	})
	if err != nil {
		tb.Fatalf("create %s: %v", rawStream, err)
	}
	conns := sh.producers + sh.workers + 8
	tr := &http.Transport{MaxIdleConns: conns, MaxIdleConnsPerHost: conns, IdleConnTimeout: time.Minute}
	e.http = &http.Client{Transport: tr, Timeout: 30 * time.Second}
	tb.Cleanup(tr.CloseIdleConnections)
	return e
}

// A path runs sh.jobs round trips and returns the time from the first
// enqueue to the last ack; it fails unless every job completed exactly once.
type pathFunc func(ctx context.Context, e *env, sh shape) (result, error)

// paths are the workloads, baseline first. ratioTo names the baseline a
// path is compared with in BenchmarkRatio.
var paths = []struct {
	name    string
	run     pathFunc
	ratioTo string
}{
	{name: "raw", run: rawPath(false, 1)},
	{name: "raw_async", run: rawPath(true, 1)},
	{name: "raw_batch", run: rawPath(false, 10)},
	{name: "go", run: goPath, ratioTo: "raw"},
	{name: "http", run: httpPath, ratioTo: "raw"},
}

// payload is a raw message: the job index in 8 digits, then padding.
func payload(i int) []byte {
	b := make([]byte, payloadSize)
	copy(b, fmt.Sprintf("%08d", i))
	for k := 8; k < len(b); k++ {
		b[k] = 'x'
	}
	return b
}

// jobBody is an enqueue request of about payloadSize bytes whose first
// argument is the job index.
func jobBody(queue string, i int) []byte {
	head := fmt.Sprintf(`{"type":"bench.noop","queue":%q,"args":[%d,"`, queue, i)
	pad := max(payloadSize-len(head)-3, 1)
	return []byte(head + strings.Repeat("x", pad) + `"]}`)
}

// argIndex reads the job index back from args `[i, "..."]`.
func argIndex(args []byte) (int, error) {
	s := strings.TrimLeft(string(args), "[ \t\r\n")
	end := strings.IndexAny(s, ", \t\r\n]")
	if end < 0 {
		return 0, fmt.Errorf("no job index in args %.40q", args)
	}
	return strconv.Atoi(s[:end])
}

// rawPath is the baseline: publish (sync or pipelined) and pull with
// FetchNoWait(fetch) + Ack on a WorkQueue stream, with the same producer
// and worker goroutines as the jetgate paths.
func rawPath(async bool, fetch int) pathFunc {
	return func(ctx context.Context, e *env, sh shape) (result, error) {
		run := nextRun()
		subj := fmt.Sprintf(rawSubject, run)
		cons, err := e.raw.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{
			Durable:       fmt.Sprintf("raw_%d", run),
			FilterSubject: subj,
			AckPolicy:     jetstream.AckExplicitPolicy,
			AckWait:       30 * time.Second,
			MaxAckPending: -1,
			MaxDeliver:    -1,
		})
		if err != nil {
			return result{}, fmt.Errorf("create raw consumer: %w", err)
		}
		defer cleanupRaw(e, subj, cons.CachedInfo().Name)
		led := newLedger(sh.jobs)
		src := &claimer{n: int64(sh.jobs)}
		c, wctx := newCrew(ctx)
		start := time.Now()
		for range sh.producers {
			if async {
				c.spawn(func() error { return rawPublishAsync(wctx, e, subj, src) })
			} else {
				c.spawn(func() error { return rawPublish(wctx, e, subj, src) })
			}
		}
		for range sh.workers {
			c.spawn(func() error { return rawWork(wctx, cons, fetch, led) })
		}
		if err := c.wait(); err != nil {
			return result{}, err
		}
		// Acks are fire and forget: count the time until the server has
		// read them all.
		if err := e.nc.FlushWithContext(ctx); err != nil {
			return result{}, fmt.Errorf("flush acks: %w", err)
		}
		d := time.Since(start)
		return led.result(d), led.verify(false)
	}
}

func cleanupRaw(e *env, subj, consumer string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = e.raw.DeleteConsumer(ctx, consumer)
	_ = e.raw.Purge(ctx, jetstream.WithPurgeSubject(subj))
}

func rawPublish(ctx context.Context, e *env, subj string, src *claimer) error {
	for i, ok := src.claim(); ok; i, ok = src.claim() {
		if _, err := e.js.Publish(ctx, subj, payload(i)); err != nil {
			return fmt.Errorf("publish %d: %w", i, err)
		}
	}
	return nil
}

func rawPublishAsync(ctx context.Context, e *env, subj string, src *claimer) error {
	var acks []jetstream.PubAckFuture
	for i, ok := src.claim(); ok; i, ok = src.claim() {
		f, err := e.async.PublishAsync(subj, payload(i), jetstream.WithStallWait(10*time.Second))
		if err != nil {
			return fmt.Errorf("publish async %d: %w", i, err)
		}
		acks = append(acks, f)
	}
	for _, f := range acks {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			return fmt.Errorf("publish async: %w", err)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

func rawWork(ctx context.Context, cons jetstream.Consumer, fetch int, led *ledger) error {
	for !led.finished() {
		batch, err := cons.FetchNoWait(fetch)
		if err != nil {
			return fmt.Errorf("fetch: %w", err)
		}
		n := 0
		for msg := range batch.Messages() {
			n++
			i, err := strconv.Atoi(string(msg.Data()[:8]))
			if err != nil {
				return fmt.Errorf("raw message without index: %w", err)
			}
			if err := msg.Ack(); err != nil {
				return fmt.Errorf("ack %d: %w", i, err)
			}
			if err := led.complete(i, ""); err != nil {
				return err
			}
		}
		if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) {
			return fmt.Errorf("fetch: %w", err)
		}
		led.fetched(n)
		if n == 0 {
			if err := pause(ctx); err != nil {
				return err
			}
		}
	}
	return nil
}

// pause waits idle after an empty fetch, or fails once ctx is done.
func pause(ctx context.Context) error {
	t := time.NewTimer(idle)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("workers gave up: %w", ctx.Err())
	}
}

// goPath goes through the admission service in-process: Enqueue of a
// parsed job, Fetch of one job at a time, Ack.
var goPath = goPathWith("bench-go", nil)

// goPathWith is the Go path on queues named prefix-<run>, every job
// carrying policy(i) as its rate_limit (policy nil: none).
func goPathWith(prefix string, policy func(i int) string) pathFunc {
	if policy == nil {
		return goPathBody(prefix, jobBody)
	}
	return goPathBody(prefix, func(queue string, i int) []byte { return limitedBody(queue, i, policy(i)) })
}

// goPathBody is the Go path on queues named prefix-<run> with job i's
// enqueue request body(queue, i).
func goPathBody(prefix string, body func(queue string, i int) []byte) pathFunc {
	return func(ctx context.Context, e *env, sh shape) (result, error) {
		svc := e.srv.Service()
		queue := fmt.Sprintf("%s-%d", prefix, nextRun())
		led := newLedger(sh.jobs)
		src := &claimer{n: int64(sh.jobs)}
		c, wctx := newCrew(ctx)
		start := time.Now()
		for range sh.producers {
			c.spawn(func() error {
				for i, ok := src.claim(); ok; i, ok = src.claim() {
					job, err := ojs.ParseJob(body(queue, i))
					if err != nil {
						return fmt.Errorf("parse job %d: %w", i, err)
					}
					if _, err := svc.Enqueue(wctx, job); err != nil {
						return fmt.Errorf("enqueue %d: %w", i, err)
					}
				}
				return nil
			})
		}
		for w := range sh.workers {
			req := ojs.FetchRequest{Queues: []string{queue}, Count: 1, WorkerID: fmt.Sprintf("bench-worker-%d", w)}
			c.spawn(func() error {
				for !led.finished() {
					jobs, err := svc.Fetch(wctx, req)
					if err != nil {
						return fmt.Errorf("fetch: %w", err)
					}
					for _, j := range jobs {
						if err := goAck(wctx, svc, j, led); err != nil {
							return err
						}
					}
					led.fetched(len(jobs))
					if len(jobs) == 0 {
						if err := pause(wctx); err != nil {
							return err
						}
					}
				}
				return nil
			})
		}
		if err := c.wait(); err != nil {
			return result{}, err
		}
		d := time.Since(start)
		return led.result(d), led.verify(true)
	}
}

type acker interface {
	Ack(context.Context, ojs.AckRequest) (*ojs.AckResult, error)
}

func goAck(ctx context.Context, svc acker, j *ojs.Job, led *ledger) error {
	i, err := argIndex(j.Args)
	if err != nil {
		return err
	}
	res, err := svc.Ack(ctx, ojs.AckRequest{JobID: j.ID})
	if err != nil {
		return fmt.Errorf("ack %s: %w", j.ID, err)
	}
	if res.State != ojs.StateCompleted {
		return fmt.Errorf("ack %s: state %s", j.ID, res.State)
	}
	return led.complete(i, j.ID)
}

// httpPath is the same workload over the HTTP binding, as a client in
// another language would run it: keep-alive connections, JSON bodies.
func httpPath(ctx context.Context, e *env, sh shape) (result, error) {
	base := e.srv.URL() + "/ojs/v1"
	queue := fmt.Sprintf("bench-http-%d", nextRun())
	led := newLedger(sh.jobs)
	src := &claimer{n: int64(sh.jobs)}
	c, wctx := newCrew(ctx)
	start := time.Now()
	for range sh.producers {
		c.spawn(func() error {
			for i, ok := src.claim(); ok; i, ok = src.claim() {
				if err := post(wctx, e.http, base+"/jobs", jobBody(queue, i), http.StatusCreated, nil); err != nil {
					return fmt.Errorf("enqueue %d: %w", i, err)
				}
			}
			return nil
		})
	}
	for w := range sh.workers {
		body := fmt.Appendf(nil, `{"queues":[%q],"count":1,"worker_id":"bench-worker-%d"}`, queue, w)
		c.spawn(func() error { return httpWork(wctx, e.http, base, body, led) })
	}
	if err := c.wait(); err != nil {
		return result{}, err
	}
	d := time.Since(start)
	return led.result(d), led.verify(true)
}

type fetchResponse struct {
	Jobs []struct {
		ID   string          `json:"id"`
		Args json.RawMessage `json:"args"`
	} `json:"jobs"`
}

type ackResponse struct {
	State string `json:"state"`
}

func httpWork(ctx context.Context, hc *http.Client, base string, fetchBody []byte, led *ledger) error {
	for !led.finished() {
		var got fetchResponse
		if err := post(ctx, hc, base+"/workers/fetch", fetchBody, http.StatusOK, &got); err != nil {
			return fmt.Errorf("fetch: %w", err)
		}
		for _, j := range got.Jobs {
			i, err := argIndex(j.Args)
			if err != nil {
				return err
			}
			var res ackResponse
			if err := post(ctx, hc, base+"/workers/ack", fmt.Appendf(nil, `{"job_id":%q}`, j.ID), http.StatusOK, &res); err != nil {
				return fmt.Errorf("ack %s: %w", j.ID, err)
			}
			if res.State != string(ojs.StateCompleted) {
				return fmt.Errorf("ack %s: state %q", j.ID, res.State)
			}
			if err := led.complete(i, j.ID); err != nil {
				return err
			}
		}
		led.fetched(len(got.Jobs))
		if len(got.Jobs) == 0 {
			if err := pause(ctx); err != nil {
				return err
			}
		}
	}
	return nil
}

// post sends a JSON body and decodes the answer into out (nil: discard),
// failing unless the status is want.
func post(ctx context.Context, hc *http.Client, url string, body []byte, want int, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/openjobspec+json")
	res, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		return err
	}
	if res.StatusCode != want {
		return fmt.Errorf("POST %s: status %d: %.200s", url, res.StatusCode, raw)
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(raw, out)
}
