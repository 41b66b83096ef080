package natsbind

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/jetgate/jetgate/admission/ojs/wire"
)

// batchParallelism bounds the backend calls of one batch in flight: each
// item is its own ack or nack (its own compare-and-swap), and running them
// side by side makes a batch cost about one round of writes.
const batchParallelism = 64

// batchResult is one item's result: the reply HTTP would give for it, or
// its error with the status HTTP would answer.
type batchResult struct {
	ok     any
	jobID  string
	status int
	err    *wire.ErrorObject
}

func (r batchResult) MarshalJSON() ([]byte, error) {
	if r.err == nil {
		return json.Marshal(r.ok)
	}
	return json.Marshal(struct {
		JobID  string            `json:"job_id"`
		Status int               `json:"status"`
		Error  *wire.ErrorObject `json:"error"`
	}{r.jobID, r.status, r.err})
}

// BatchReply is the reply of workers.ackbatch and workers.nackbatch: one
// result per item, in the items' order.
type BatchReply struct {
	Results []batchResult `json:"results"`
}

// ackBatch is workers.ackbatch (NATS only): {"acks": [<ack body>...]}.
func (s *Service) ackBatch(c *call) (any, error) {
	return s.runBatch(c, "acks", func(item []byte) (any, error) { return s.ackOne(c.ctx, item) })
}

// nackBatch is workers.nackbatch (NATS only): {"nacks": [<nack body>...]}.
func (s *Service) nackBatch(c *call) (any, error) {
	return s.runBatch(c, "nacks", func(item []byte) (any, error) { return s.nackOne(c.ctx, item) })
}

// runBatch decodes the list and runs one call per item, at most
// batchParallelism at once. A malformed list fails the request (400); a
// failing item fails only its result, with its field named
// "<field>[i].<name>".
func (s *Service) runBatch(c *call, field string, one func(item []byte) (any, error)) (any, error) {
	items, err := wire.DecodeBatchItems(c.data, field)
	if err != nil {
		return nil, err
	}
	results := make([]batchResult, len(items))
	sem := make(chan struct{}, batchParallelism)
	var wg sync.WaitGroup
	for i, item := range items {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			v, err := one(item)
			if err == nil {
				results[i] = batchResult{ok: v}
				return
			}
			e := wire.Classify(wire.PrefixField(fmt.Sprintf("%s[%d].", field, i), err))
			if e.Status >= 500 {
				s.log.Log(context.Background(), failureLevel(err), "NATS batch item failed", "field", field, "index", i,
					"request_id", c.requestID, "error", err)
			}
			env := e.Envelope(c.requestID).Error
			results[i] = batchResult{jobID: wire.ItemJobID(item), status: e.Status, err: &env}
		}()
	}
	wg.Wait()
	return BatchReply{Results: results}, nil
}
