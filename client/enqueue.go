package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
)

// Request is one job of EnqueueBatch.
type Request struct {
	Type    string
	Args    []any
	Options []Option
}

// Enqueue enqueues a job of type typ with args and returns it as stored.
// A 429 is retried as Config.Retry says; the breaker may refuse with
// ErrCircuitOpen; a queue under pressure paces the call. A duplicate of a
// unique job answers the existing job.
func (c *Client) Enqueue(ctx context.Context, typ string, args []any, opts ...Option) (*Job, error) {
	s, err := newSpec(ctx, typ, args, opts)
	if err != nil {
		return nil, fmt.Errorf("enqueue %s: %w", typ, err)
	}
	body, err := jsonBody(s)
	if err != nil {
		return nil, fmt.Errorf("enqueue %s: %w", typ, err)
	}
	var out struct {
		Job *Job `json:"job"`
	}
	r := &request{op: "jobs.enqueue", method: http.MethodPost, path: "/ojs/v1/jobs", body: body, header: s.header()}
	if err := c.produce(ctx, []string{s.Options.Queue}, r, &out); err != nil {
		return nil, err
	}
	if out.Job == nil {
		return nil, errors.New("enqueue: answer without a job")
	}
	return out.Job, nil
}

// EnqueueBatch enqueues jobs all or nothing and returns them as stored,
// in order.
func (c *Client) EnqueueBatch(ctx context.Context, jobs []Request) ([]*Job, error) {
	var body bytes.Buffer
	body.WriteString(`{"jobs":[`)
	var header map[string]string
	queues := map[string]bool{}
	for i, j := range jobs {
		s, err := newSpec(ctx, j.Type, j.Args, j.Options)
		if err != nil {
			return nil, fmt.Errorf("enqueue batch: jobs[%d]: %w", i, err)
		}
		b, err := jsonBody(s)
		if err != nil {
			return nil, fmt.Errorf("enqueue batch: jobs[%d]: %w", i, err)
		}
		if i > 0 {
			body.WriteByte(',')
		}
		body.Write(b)
		queues[s.Options.Queue] = true
		if h := s.header(); h != nil {
			header = h
		}
	}
	body.WriteString(`]}`)
	var out struct {
		Jobs []*Job `json:"jobs"`
	}
	names := make([]string, 0, len(queues))
	for q := range queues {
		names = append(names, q)
	}
	r := &request{op: "jobs.batch", method: http.MethodPost, path: "/ojs/v1/jobs/batch", body: body.Bytes(), header: header}
	if err := c.produce(ctx, names, r, &out); err != nil {
		return nil, err
	}
	return out.Jobs, nil
}

// produce sends an enqueue with the producer's backpressure handling
// (ojs-backpressure.md 8): pacing by the queues' pressure, the breaker,
// and retries of 429s.
func (c *Client) produce(ctx context.Context, queues []string, r *request, out any) error {
	var wait int64
	for _, q := range queues {
		wait = max(wait, int64(c.bp.pace(q)))
	}
	if err := sleep(ctx, durationOf(wait)); err != nil {
		return err
	}
	for n := 0; ; n++ {
		if !c.bp.admit() {
			return ErrCircuitOpen
		}
		res, err := c.call(ctx, r, out)
		e, is := errors.AsType[*Error](err)
		refused := is && e.Status == http.StatusTooManyRequests
		c.bp.result(refused)
		if err == nil {
			for _, q := range queues {
				c.bp.notePressure(q, res.header)
			}
			return nil
		}
		if !refused || c.bp.retry.MaxRetries < 0 || n >= c.bp.retry.MaxRetries {
			return err
		}
		for _, q := range queues {
			c.bp.notePressure(q, e.Header)
		}
		d := c.bp.wait(n, e.RetryAfter)
		c.log.Debug("enqueue refused with 429; retrying", "op", r.op, "wait", d, "retry", n+1)
		if err := sleep(ctx, d); err != nil {
			return errors.Join(e, err)
		}
	}
}
