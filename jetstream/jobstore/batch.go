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
	msgs := make([]*nats.Msg, len(jobs))
	for i, j := range jobs {
		b, err := j.AppendJSON(make([]byte, 0, 768))
		if err != nil {
			return fmt.Errorf("encode job %s: %w", j.ID, err)
		}
		msgs[i] = recordMsg(j, b, 0, 0)
	}
	if _, err := s.atomicBatch(ctx, msgs); err != nil {
		return s.batchFailed(ctx, jobs, err)
	}
	return nil
}

// atomicBatch stores msgs in one JetStream atomic batch (ADR-50): all or
// none. It returns the stream sequence of the last message; a batch is
// stored at consecutive sequences.
func (s *Store) atomicBatch(ctx context.Context, msgs []*nats.Msg) (uint64, error) {
	id := nuid.Next()
	for i, m := range msgs {
		m.Header.Set(hdrBatchID, id)
		m.Header.Set(hdrBatchSeq, strconv.Itoa(i+1))
		switch i {
		case 0, len(msgs) - 1:
			if i == len(msgs)-1 {
				m.Header.Set(hdrBatchCommit, "1")
			}
			seq, err := s.batchRequest(ctx, m)
			if err != nil || i == len(msgs)-1 {
				return seq, err
			}
		default:
			if err := s.nc.PublishMsg(m); err != nil {
				return 0, fmt.Errorf("publish batch: %w", Unavailable(err))
			}
		}
	}
	return 0, nil
}

type pubAckResponse struct {
	Error    *jetstream.APIError `json:"error,omitempty"`
	Sequence uint64              `json:"seq,omitempty"`
}

// batchRequest sends one message of an atomic batch and waits for its
// answer: nothing for the first, the publish ack (its sequence) for the
// commit, an error for a refused batch.
func (s *Store) batchRequest(ctx context.Context, m *nats.Msg) (uint64, error) {
	resp, err := s.nc.RequestMsgWithContext(ctx, m)
	if err != nil {
		return 0, fmt.Errorf("batch publish: %w", Unavailable(err))
	}
	if len(resp.Data) == 0 {
		return 0, nil
	}
	var r pubAckResponse
	if err := json.Unmarshal(resp.Data, &r); err != nil {
		return 0, fmt.Errorf("batch publish: bad reply: %w", err)
	}
	if r.Error != nil {
		return 0, r.Error
	}
	return r.Sequence, nil
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
// waits until JetStream has stored all of them. The message of a job
// whose id is in named (ids a client chose) is published alone, checked
// against a job of that id stored as its ready message alone
// (PublishReadyNamed): one there is a DuplicateError.
func (s *Store) PublishReadyBatch(ctx context.Context, jobs []*ojs.Job, named map[string]bool) error {
	futures := make([]jetstream.PubAckFuture, 0, len(jobs))
	for _, j := range jobs {
		if named[j.ID] {
			if err := s.PublishReadyNamed(ctx, j); err != nil {
				return err
			}
			continue
		}
		m := ReadyMsg(j)
		f, err := s.publishReadyAsync(ctx, j.Queue, j.Priority, m)
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
