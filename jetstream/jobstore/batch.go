package jobstore

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/jetgate/jetgate/admission/ojs"
	"github.com/jetgate/jetgate/jetstream/topology"
)

// MaxBatch is the largest atomic batch JetStream accepts by default.
const MaxBatch = 1000

// Headers of JetStream atomic batch publishing (ADR-50).
const (
	hdrBatchID     = "Nats-Batch-Id"
	hdrBatchSeq    = "Nats-Batch-Sequence"
	hdrBatchCommit = "Nats-Batch-Commit"
)

// CreateBatch creates every record in one JetStream atomic batch on the
// jobs bucket's stream: all are stored or none. Each message expects its
// key to be empty, so an existing id fails the whole batch with a
// DuplicateError naming it.
func (s *Store) CreateBatch(ctx context.Context, jobs []*ojs.Job) error {
	switch {
	case len(jobs) == 0:
		return nil
	case len(jobs) == 1:
		_, err := s.Create(ctx, jobs[0])
		return err
	case len(jobs) > MaxBatch:
		return &ojs.ValidationError{Field: "jobs", Rule: fmt.Sprintf("at most %d jobs", MaxBatch)}
	}
	id := nuid.Next()
	for i, j := range jobs {
		b, err := j.AppendJSON(make([]byte, 0, 768))
		if err != nil {
			return fmt.Errorf("encode job %s: %w", j.ID, err)
		}
		m := nats.NewMsg("$KV." + topology.JobsBucket + "." + j.ID)
		m.Data = b
		m.Header.Set(hdrBatchID, id)
		m.Header.Set(hdrBatchSeq, strconv.Itoa(i+1))
		m.Header.Set(jetstream.ExpectedLastSubjSeqHeader, "0")
		switch i {
		case 0:
			if err := s.batchRequest(ctx, m); err != nil {
				return s.batchFailed(ctx, jobs, err)
			}
		case len(jobs) - 1:
			m.Header.Set(hdrBatchCommit, "1")
			if err := s.batchRequest(ctx, m); err != nil {
				return s.batchFailed(ctx, jobs, err)
			}
		default:
			if err := s.nc.PublishMsg(m); err != nil {
				return fmt.Errorf("publish batch: %w", Unavailable(err))
			}
		}
	}
	return nil
}

type pubAckResponse struct {
	Error *jetstream.APIError `json:"error,omitempty"`
}

func (s *Store) batchRequest(ctx context.Context, m *nats.Msg) error {
	resp, err := s.nc.RequestMsgWithContext(ctx, m)
	if err != nil {
		return fmt.Errorf("batch publish: %w", Unavailable(err))
	}
	if len(resp.Data) == 0 {
		return nil
	}
	var r pubAckResponse
	if err := json.Unmarshal(resp.Data, &r); err != nil {
		return fmt.Errorf("batch publish: bad reply: %w", err)
	}
	if r.Error != nil {
		return r.Error
	}
	return nil
}

// batchFailed turns a rejected batch into the error the caller should see:
// a DuplicateError for the first id that already exists, else err.
func (s *Store) batchFailed(ctx context.Context, jobs []*ojs.Job, err error) error {
	if wrongLastSeq(err) {
		for _, j := range jobs {
			if _, err := s.assets.Jobs.Get(ctx, j.ID); err == nil {
				return &ojs.DuplicateError{ExistingID: j.ID}
			}
		}
	}
	return fmt.Errorf("create batch: %w", err)
}

// PublishReadyBatch publishes the ready messages of jobs, pipelined, and
// waits until JetStream has stored all of them.
func (s *Store) PublishReadyBatch(ctx context.Context, jobs []*ojs.Job) error {
	if len(jobs) == 0 {
		return nil
	}
	futures := make([]jetstream.PubAckFuture, 0, len(jobs))
	for _, j := range jobs {
		f, err := s.publishReadyAsync(ctx, j)
		if err != nil {
			return fmt.Errorf("publish ready %s: %w", j.ID, Unavailable(err))
		}
		futures = append(futures, f)
	}
	for _, f := range futures {
		select {
		case ack := <-f.Ok():
			s.noteReady(f.Msg().Subject, ack)
		case err := <-f.Err():
			return fmt.Errorf("publish ready: %w", Unavailable(err))
		case <-ctx.Done():
			return fmt.Errorf("publish ready: %w", Unavailable(ctx.Err()))
		}
	}
	return nil
}
