package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetgate/jetgate/admission/ojs"
)

// sdkPoll is the official OJS Go SDK worker's default poll interval: it
// sleeps this long after a fetch that returned no job.
const sdkPoll = time.Second

// drainJob is a job a drain's fetch returned: its index, its id (jetgate;
// "" for raw messages) and how to ack it.
type drainJob struct {
	index int
	id    string
	ack   func(ctx context.Context) error
}

// sdkDrain drains n queued jobs the way the official OJS Go SDK worker
// runs handlers handlers: one fetch loop asks for as many jobs as it has
// free handler slots (waiting while none is free), runs each job's
// (no-op) handler on a goroutine of its own, which acks the job with a
// request of its own and frees its slot; after a fetch that returned no
// job the loop sleeps poll. jobs/s runs from the first fetch to the n-th
// ack.
func sdkDrain(ctx context.Context, n, handlers int, poll time.Duration, fetch func(ctx context.Context, count int) ([]drainJob, error)) (Sample, error) {
	handlers = max(handlers, 1)
	led := newLedger(false)
	c, wctx := newCrew(ctx)
	free := make(chan struct{}, handlers) // one token per free slot
	for range handlers {
		free <- struct{}{}
	}
	done := make(chan struct{}) // closed by the n-th ack
	var finished atomic.Int64
	var end atomic.Int64 // unix ns of the n-th ack
	start := time.Now()
	tl := startTimeline(&led.acked)
	handle := func(j drainJob) func() error {
		return func() error {
			defer func() { free <- struct{}{} }()
			led.started(j.index)
			if err := j.ack(wctx); err != nil {
				return err
			}
			if err := led.complete(j.index, j.id); err != nil {
				return err
			}
			if finished.Add(1) == int64(n) {
				end.Store(time.Now().UnixNano())
				close(done)
			}
			return nil
		}
	}
	c.spawn(func() error {
		for {
			select {
			case <-free:
			case <-done:
				return nil
			case <-wctx.Done():
				return fmt.Errorf("drain: %w", wctx.Err())
			}
			k := 1 + takeFree(free, handlers-1)
			jobs, err := fetch(wctx, k)
			if err != nil {
				return err
			}
			if len(jobs) > k {
				return fmt.Errorf("fetch of %d returned %d jobs", k, len(jobs))
			}
			led.fetched(len(jobs))
			for range k - len(jobs) {
				free <- struct{}{}
			}
			for _, j := range jobs {
				c.spawn(handle(j))
			}
			if len(jobs) == 0 {
				select {
				case <-time.After(poll):
				case <-done:
					return nil
				case <-wctx.Done():
					return fmt.Errorf("drain: %w", wctx.Err())
				}
			}
		}
	})
	err := c.wait()
	timeline := tl.stop()
	if err != nil {
		return Sample{}, err
	}
	if err := led.verify(n, n, false); err != nil {
		return Sample{}, err
	}
	elapsed := time.Unix(0, end.Load()).Sub(start)
	return Sample{
		Ops:      int64(n),
		Elapsed:  elapsed,
		Timeline: timeline,
		Metrics: map[string]float64{
			"jobs/s": float64(n) / elapsed.Seconds(),
			// For results.json: how the drain went.
			"fetches":       float64(led.fetches.Load()),
			"empty fetches": float64(led.empty.Load()),
		},
	}, nil
}

// insertPerSec is the rate of a drain case's batch inserts.
var insertPerSec = Metric{Name: "insert jobs/s"}

// HTTPBatchDrain is the SDK-style drain over HTTP on queue: n jobs
// enqueued by one producer in batches of batch (POST /ojs/v1/jobs/batch,
// one after the other, as a loop over the SDK's EnqueueBatch does), then
// drained by an SDK-style worker of handlers handlers (POST
// /ojs/v1/workers/fetch with count = free slots and a worker_id, one POST
// /ojs/v1/workers/ack per job), in a process of its own unless inProcess
// (workerproc.go). The worker's HTTP client keeps a keep-alive connection
// per handler. jobs/s is the drain's rate, insert jobs/s the inserts'.
// queue is left empty.
func (e *Env) HTTPBatchDrain(ctx context.Context, queue string, n, batch, handlers, size int, inProcess bool) (Sample, error) {
	base := e.httpURL + "/ojs/v1"
	hc := keepAliveClient(2)
	defer hc.CloseIdleConnections()
	ins, err := enqueueRun(ctx, Shape{Jobs: n, Producers: 1}, batch, func(ctx context.Context, first, k int) error {
		var body bytes.Buffer
		body.WriteString(`{"jobs":[`)
		for i := first; i < first+k; i++ {
			if i > first {
				body.WriteByte(',')
			}
			body.Write(jobBody(queue, i, size))
		}
		body.WriteString(`]}`)
		var got struct {
			Count int `json:"count"`
		}
		if err := post(ctx, hc, base+"/jobs/batch", body.Bytes(), http.StatusCreated, &got); err != nil {
			return fmt.Errorf("enqueue batch at %d: %w", first, err)
		}
		if got.Count != k {
			return fmt.Errorf("enqueue batch at %d: count %d, want %d", first, got.Count, k)
		}
		return nil
	})
	if err != nil {
		return Sample{}, err
	}
	s, err := drainWith(ctx, workerSpec{Kind: workerSDKHTTP, URL: e.httpURL, Queue: queue,
		WorkerID: fmt.Sprintf("bench-sdk-%d", nextRun()), Jobs: n, Handlers: handlers}, inProcess, nil)
	if err != nil {
		return Sample{}, err
	}
	s.Metrics[insertPerSec.Name] = ins.Metrics["jobs/s"]
	return s, nil
}

// sdkHTTPDrain is HTTPBatchDrain's worker: spec.Jobs jobs of spec.Queue
// drained over HTTP with hc by an SDK-style worker (sdkDrain).
func sdkHTTPDrain(ctx context.Context, hc *http.Client, spec workerSpec) (Sample, error) {
	base := spec.URL + "/ojs/v1"
	return sdkDrain(ctx, spec.Jobs, spec.Handlers, sdkPoll, func(ctx context.Context, count int) ([]drainJob, error) {
		var got fetchResponse
		req := fmt.Appendf(nil, `{"queues":[%q],"count":%d,"worker_id":%q}`, spec.Queue, count, spec.WorkerID)
		if err := post(ctx, hc, base+"/workers/fetch", req, http.StatusOK, &got); err != nil {
			return nil, fmt.Errorf("fetch: %w", err)
		}
		jobs := make([]drainJob, 0, len(got.Jobs))
		for _, j := range got.Jobs {
			i, err := argIndex(j.Args)
			if err != nil {
				return nil, err
			}
			id := j.ID
			jobs = append(jobs, drainJob{index: i, id: id, ack: func(ctx context.Context) error {
				var res ackResponse
				if err := post(ctx, hc, base+"/workers/ack", fmt.Appendf(nil, `{"job_id":%q}`, id), http.StatusOK, &res); err != nil {
					return fmt.Errorf("ack %s: %w", id, err)
				}
				if res.State != string(ojs.StateCompleted) {
					return fmt.Errorf("ack %s: state %q", id, res.State)
				}
				return nil
			}})
		}
		return jobs, nil
	})
}

// RawBatchDrain is HTTPBatchDrain's baseline on raw JetStream: n messages
// stored by one producer in atomic batches of batch (the all-or-nothing
// guarantee of a batch enqueue), then drained by the same SDK-style
// worker (sdkRawDrain), in a process of its own unless inProcess.
func (e *Env) RawBatchDrain(ctx context.Context, n, batch, handlers, size int, inProcess bool) (Sample, error) {
	subj, cons, err := e.rawRun(ctx, "raw_drain")
	if err != nil {
		return Sample{}, err
	}
	defer e.cleanupRaw(subj, cons.CachedInfo().Name)
	ins, err := enqueueRun(ctx, Shape{Jobs: n, Producers: 1}, batch, func(ctx context.Context, first, k int) error {
		return e.atomicBatch(ctx, subj, first, k, size)
	})
	if err != nil {
		return Sample{}, err
	}
	s, err := drainWith(ctx, workerSpec{Kind: workerSDKRaw, URL: e.nc.ConnectedUrl(), Stream: rawStream,
		Consumer: cons.CachedInfo().Name, Jobs: n, Handlers: handlers}, inProcess, e.nc)
	if err != nil {
		return Sample{}, err
	}
	s.Metrics[insertPerSec.Name] = ins.Metrics["jobs/s"]
	return s, nil
}

// sdkRawDrain drains n messages of cons with the SDK-style worker:
// FetchNoWait(free slots) on a durable pull consumer of a WorkQueue
// stream, each message acked by its handler with an ack the server
// confirms (DoubleAck), as an ack request waits for its answer.
func sdkRawDrain(ctx context.Context, cons jetstream.Consumer, n, handlers int) (Sample, error) {
	return sdkDrain(ctx, n, handlers, sdkPoll, func(ctx context.Context, count int) ([]drainJob, error) {
		b, err := cons.FetchNoWait(count)
		if err != nil {
			return nil, fmt.Errorf("fetch: %w", err)
		}
		var jobs []drainJob
		for msg := range b.Messages() {
			i, err := strconv.Atoi(string(msg.Data()[:8]))
			if err != nil {
				return nil, fmt.Errorf("raw message without index: %w", err)
			}
			jobs = append(jobs, drainJob{index: i, ack: func(ctx context.Context) error {
				if err := msg.DoubleAck(ctx); err != nil {
					return fmt.Errorf("ack %d: %w", i, err)
				}
				return nil
			}})
		}
		if err := b.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) {
			return nil, fmt.Errorf("fetch: %w", err)
		}
		return jobs, nil
	})
}

// takeFree takes up to max more tokens that wait in free without blocking
// (the free slots beside the one a worker loop just took) and returns how
// many it took.
func takeFree(free <-chan struct{}, max int) int {
	n := 0
	for n < max {
		select {
		case <-free:
			n++
		default:
			return n
		}
	}
	return n
}
