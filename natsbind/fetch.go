package natsbind

import (
	"encoding/json"
	"time"

	"github.com/jetgate/jetgate/admission/ojs"
	"github.com/jetgate/jetgate/admission/ojs/wire"
	"github.com/jetgate/jetgate/admission/tracing"
)

// MaxFetchWait bounds a fetch's "wait_ms" (issue 19): a longer wait
// answers 400 naming the field.
const MaxFetchWait = 30 * time.Second

// Backoff between empty polls of a waiting fetch: short at first, so a
// job that arrives soon is handed out soon, then longer, so an idle
// worker's wait costs a few backend calls per second, not a spin.
const (
	pollFirst = 5 * time.Millisecond
	pollMax   = 250 * time.Millisecond
)

// fetch is FETCH with "wait_ms": the reply comes as soon as "count" jobs
// are claimed, or when the wait expires with what was claimed by then
// (maybe none). wait_ms 0 (the default) answers at once, as HTTP does.
func (s *Service) fetch(c *call) (any, error) {
	req, err := wire.DecodeFetch(c.data, s.cfg.MaxFetchCount)
	if err != nil {
		return nil, err
	}
	wait, err := wire.DecodeFetchWait(c.data, MaxFetchWait)
	if err != nil {
		return nil, err
	}
	// The reply must fit the server's max_payload (issue 31): the jobs
	// that would not fit are not claimed, and stay for the next fetch.
	req.Budget = ojs.NewFetchBudget(s.nc.MaxPayload() - replyHeaders - int64(len(`{"jobs":[]}`)))
	jobs, err := s.fetchWait(c, req, wait)
	if err != nil {
		return nil, err
	}
	tracing.LinkJobs(c.ctx, jobs)
	return jobsReply("jobs", wire.PublicJobs(jobs))
}

// fetchWait polls Backend.Fetch for the jobs still wanted until it has
// req.Count, the reply is full (req.Budget), the wait ends, the request's
// context ends or the service stops. Jobs claimed before an error are
// still answered: a claim is not undone, so losing them would leave them
// active until their lease expires.
func (s *Service) fetchWait(c *call, req ojs.FetchRequest, wait time.Duration) ([]*ojs.Job, error) {
	want := req.Count
	jobs, err := s.b.Fetch(c.ctx, req)
	if err != nil || len(jobs) >= want || wait <= 0 || req.Budget.Full() {
		return jobs, err
	}
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	backoff := time.Duration(0) // a poll that found jobs is followed at once
	if len(jobs) == 0 {
		backoff = pollFirst
	}
	poll := time.NewTimer(backoff)
	defer poll.Stop()
	for {
		select {
		case <-deadline.C:
			return jobs, nil
		case <-c.ctx.Done():
			return jobs, nil
		case <-s.stopping:
			return jobs, nil
		case <-poll.C:
		}
		req.Count = want - len(jobs)
		more, err := s.b.Fetch(c.ctx, req)
		if err != nil {
			if len(jobs) > 0 {
				return jobs, nil
			}
			return nil, err
		}
		jobs = append(jobs, more...)
		if len(jobs) >= want || req.Budget.Full() {
			return jobs, nil
		}
		switch {
		case len(more) > 0:
			backoff = 0
		case backoff == 0:
			backoff = pollFirst
		default:
			backoff = min(backoff*2, pollMax)
		}
		poll.Reset(backoff)
	}
}

// jobsReply encodes {"<key>": [jobs...]} with each job encoded once by
// AppendJSON, as httpbind does for its hot replies.
func jobsReply(key string, list []*ojs.Job) (json.RawMessage, error) {
	b := make([]byte, 0, 512*len(list)+32)
	b = append(b, `{"`...)
	b = append(b, key...)
	b = append(b, `":[`...)
	for i, j := range list {
		if i > 0 {
			b = append(b, ',')
		}
		var err error
		if b, err = j.AppendJSON(b); err != nil {
			return nil, err
		}
	}
	return append(b, ']', '}'), nil
}

// jobReply encodes {"job": job} the same way, for the hot enqueue reply.
func jobReply(job *ojs.Job) (json.RawMessage, error) {
	b := append(make([]byte, 0, 1024), `{"job":`...)
	b, err := job.AppendJSON(b)
	if err != nil {
		return nil, err
	}
	return append(b, '}'), nil
}
