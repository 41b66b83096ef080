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
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetgate/jetgate/admission/ojs"
)

// runSeq numbers workload runs so each uses its own queue or consumer.
var runSeq atomic.Int64

func nextRun() int64 { return runSeq.Add(1) }

// payload is a raw message of size bytes: the job index in 8 digits, then
// padding.
func payload(i, size int) []byte {
	b := bytes.Repeat([]byte{'x'}, max(size, 8))
	copy(b, fmt.Sprintf("%08d", i))
	return b
}

// jobBody is an enqueue request of about size bytes whose first argument
// is the job index.
func jobBody(queue string, i, size int) []byte {
	head := fmt.Sprintf(`{"type":"bench.noop","queue":%q,"args":[%d,"`, queue, i)
	pad := max(size-len(head)-3, 1)
	return []byte(head + strings.Repeat("x", pad) + `"]}`)
}

// withField adds `,"name":value` to a JSON object body.
func withField(body []byte, name, value string) []byte {
	return append(body[:len(body)-1], fmt.Appendf(nil, `,%q:%s}`, name, value)...)
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

// RawRoundTrip is the baseline: publish (synchronously, or pipelined with
// async) and pull with FetchNoWait(fetch) + Ack on a WorkQueue stream,
// with the same producer and worker goroutines as the jetgate paths.
func (e *Env) RawRoundTrip(ctx context.Context, sh Shape, async bool, fetch int) (Sample, error) {
	subj, cons, err := e.rawRun(ctx, "raw")
	if err != nil {
		return Sample{}, err
	}
	defer e.cleanupRaw(subj, cons.CachedInfo().Name)
	size := sh.payloadBytes()
	p := pipeline{
		produce: func(ctx context.Context, i int) error {
			if async {
				// Pipelined: a lost publish shows as a job never acked.
				if _, err := e.async.PublishAsync(subj, payload(i, size), jetstream.WithStallWait(10*time.Second)); err != nil {
					return fmt.Errorf("publish async %d: %w", i, err)
				}
				return nil
			}
			if _, err := e.js.Publish(ctx, subj, payload(i, size)); err != nil {
				return fmt.Errorf("publish %d: %w", i, err)
			}
			return nil
		},
		worker: func(int) func(context.Context, *ledger) (int, error) {
			return func(ctx context.Context, led *ledger) (int, error) { return rawFetch(cons, fetch, led) }
		},
	}
	s, err := p.run(ctx, sh)
	if err != nil {
		return s, err
	}
	// Acks are fire and forget: count the time until the server has read
	// them all.
	if err := e.nc.FlushWithContext(ctx); err != nil {
		return s, fmt.Errorf("flush acks: %w", err)
	}
	return s, nil
}

func (e *Env) publishAsync(ctx context.Context, subj string, data []byte) error {
	f, err := e.async.PublishAsync(subj, data, jetstream.WithStallWait(10*time.Second))
	if err != nil {
		return fmt.Errorf("publish async: %w", err)
	}
	select {
	case <-f.Ok():
		return nil
	case err := <-f.Err():
		return fmt.Errorf("publish async: %w", err)
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (e *Env) cleanupRaw(subj, consumer string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if consumer != "" {
		_ = e.raw.DeleteConsumer(ctx, consumer)
	}
	_ = e.raw.Purge(ctx, jetstream.WithPurgeSubject(subj))
}

func rawFetch(cons jetstream.Consumer, fetch int, led *ledger) (int, error) {
	batch, err := cons.FetchNoWait(fetch)
	if err != nil {
		return 0, fmt.Errorf("fetch: %w", err)
	}
	n := 0
	for msg := range batch.Messages() {
		n++
		i, err := strconv.Atoi(string(msg.Data()[:8]))
		if err != nil {
			return n, fmt.Errorf("raw message without index: %w", err)
		}
		led.started(i)
		if err := msg.Ack(); err != nil {
			return n, fmt.Errorf("ack %d: %w", i, err)
		}
		if err := led.complete(i, ""); err != nil {
			return n, err
		}
	}
	if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) {
		return n, fmt.Errorf("fetch: %w", err)
	}
	return n, nil
}

// BodyFunc is the enqueue request of job i on queue, of about size bytes.
type BodyFunc func(queue string, i, size int) []byte

// GoRoundTrip goes through the admission service in-process on queue:
// Enqueue of a parsed job, Fetch of one job at a time, Ack. body builds
// the requests (nil: plain jobs). A run leaves the queue empty, so runs of
// one side share their queue: the warm-up round pays for creating it, as
// the raw baseline creates its consumer before the clock starts.
func (e *Env) GoRoundTrip(ctx context.Context, sh Shape, queue string, body BodyFunc) (Sample, error) {
	svc := e.srv.Service()
	if body == nil {
		body = jobBody
	}
	size := sh.payloadBytes()
	p := pipeline{
		ids: true,
		produce: func(ctx context.Context, i int) error {
			job, err := ojs.ParseJob(body(queue, i, size))
			if err != nil {
				return fmt.Errorf("parse job %d: %w", i, err)
			}
			if _, err := svc.Enqueue(ctx, job); err != nil {
				return fmt.Errorf("enqueue %d: %w", i, err)
			}
			return nil
		},
		worker: func(w int) func(context.Context, *ledger) (int, error) {
			req := ojs.FetchRequest{Queues: []string{queue}, Count: 1, WorkerID: fmt.Sprintf("bench-worker-%d", w)}
			return func(ctx context.Context, led *ledger) (int, error) {
				jobs, err := svc.Fetch(ctx, req)
				if err != nil {
					return 0, fmt.Errorf("fetch: %w", err)
				}
				for _, j := range jobs {
					if err := goAck(ctx, svc, j, led); err != nil {
						return 0, err
					}
				}
				return len(jobs), nil
			}
		},
	}
	return p.run(ctx, sh)
}

type acker interface {
	Ack(context.Context, ojs.AckRequest) (*ojs.AckResult, error)
}

func goAck(ctx context.Context, svc acker, j *ojs.Job, led *ledger) error {
	i, err := argIndex(j.Args)
	if err != nil {
		return err
	}
	led.started(i)
	res, err := svc.Ack(ctx, ojs.AckRequest{JobID: j.ID})
	if err != nil {
		return fmt.Errorf("ack %s: %w", j.ID, err)
	}
	if res.State != ojs.StateCompleted {
		return fmt.Errorf("ack %s: state %s", j.ID, res.State)
	}
	return led.complete(i, j.ID)
}

// HTTPRoundTrip is the Go round trip over the HTTP binding on queue, as a
// client in another language would run it: POST /ojs/v1/jobs,
// /workers/fetch and /workers/ack over keep-alive connections, JSON
// bodies.
func (e *Env) HTTPRoundTrip(ctx context.Context, sh Shape, queue string) (Sample, error) {
	base := e.httpURL + "/ojs/v1"
	size := sh.payloadBytes()
	p := pipeline{
		ids: true,
		produce: func(ctx context.Context, i int) error {
			if err := post(ctx, e.http, base+"/jobs", jobBody(queue, i, size), http.StatusCreated, nil); err != nil {
				return fmt.Errorf("enqueue %d: %w", i, err)
			}
			return nil
		},
		worker: func(w int) func(context.Context, *ledger) (int, error) {
			body := fmt.Appendf(nil, `{"queues":[%q],"count":1,"worker_id":"bench-worker-%d"}`, queue, w)
			return func(ctx context.Context, led *ledger) (int, error) { return httpFetch(ctx, e.http, base, body, led) }
		},
	}
	return p.run(ctx, sh)
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

func httpFetch(ctx context.Context, hc *http.Client, base string, fetchBody []byte, led *ledger) (int, error) {
	var got fetchResponse
	if err := post(ctx, hc, base+"/workers/fetch", fetchBody, http.StatusOK, &got); err != nil {
		return 0, fmt.Errorf("fetch: %w", err)
	}
	for _, j := range got.Jobs {
		i, err := argIndex(j.Args)
		if err != nil {
			return 0, err
		}
		led.started(i)
		var res ackResponse
		if err := post(ctx, hc, base+"/workers/ack", fmt.Appendf(nil, `{"job_id":%q}`, j.ID), http.StatusOK, &res); err != nil {
			return 0, fmt.Errorf("ack %s: %w", j.ID, err)
		}
		if res.State != string(ojs.StateCompleted) {
			return 0, fmt.Errorf("ack %s: state %q", j.ID, res.State)
		}
		if err := led.complete(i, j.ID); err != nil {
			return 0, err
		}
	}
	return len(got.Jobs), nil
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

// rawRun makes the subject of a new raw run and its durable pull consumer
// (named prefix_<run>) on the WorkQueue baseline stream.
func (e *Env) rawRun(ctx context.Context, prefix string) (string, jetstream.Consumer, error) {
	run := nextRun()
	subj := fmt.Sprintf(rawSubject, run)
	cons, err := e.raw.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{
		Durable:       fmt.Sprintf("%s_%d", prefix, run),
		FilterSubject: subj,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       30 * time.Second,
		MaxAckPending: -1,
		MaxDeliver:    -1,
	})
	if err != nil {
		return "", nil, fmt.Errorf("create raw consumer: %w", err)
	}
	return subj, cons, nil
}
