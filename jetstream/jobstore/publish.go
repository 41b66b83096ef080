package jobstore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// publish stores m in its stream and returns the sequence JetStream gave
// it. It is jetstream.JetStream.PublishMsg without options, answer for
// answer and error for error: the same request, the same retries while no
// stream answers (a leader election), the same default timeout when ctx
// has none, and the same errors (*jetstream.APIError wrapped as "nats: %w",
// jetstream.ErrNoStreamResponse, jetstream.ErrInvalidJSAck). Only the
// usual answer, {"stream":"NAME","seq":N}, is read without encoding/json:
// decoding it was 60% of a record write's CPU in jetgate's process
// (docs/performance.md).
func (s *Store) publish(ctx context.Context, m *nats.Msg) (uint64, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.js.Options().DefaultTimeout)
		defer cancel()
	}
	resp, err := s.nc.RequestMsgWithContext(ctx, m)
	for r := 0; errors.Is(err, nats.ErrNoResponders) && r < jetstream.DefaultPubRetryAttempts; r++ {
		t := time.NewTimer(jetstream.DefaultPubRetryWait)
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
		resp, err = s.nc.RequestMsgWithContext(ctx, m)
	}
	if err != nil {
		if errors.Is(err, nats.ErrNoResponders) {
			return 0, jetstream.ErrNoStreamResponse
		}
		return 0, err
	}
	return readPubAck(resp.Data)
}

// readPubAck reads a JetStream publish answer: the stored sequence, or
// the error it carries.
func readPubAck(b []byte) (uint64, error) {
	if seq, ok := plainPubAck(b); ok {
		return seq, nil
	}
	// The shape jetstream decodes an answer into (nats.go v1.55.0,
	// jetstream/publish.go: pubAckResponse), so odd answers fail alike.
	var r struct {
		Type  string              `json:"type"`
		Error *jetstream.APIError `json:"error,omitempty"`
		*jetstream.PubAck
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return 0, jetstream.ErrInvalidJSAck
	}
	if r.Error != nil {
		return 0, fmt.Errorf("nats: %w", r.Error)
	}
	if r.PubAck == nil || r.Stream == "" {
		return 0, jetstream.ErrInvalidJSAck
	}
	return r.Sequence, nil
}

// plainPubAck reads the answer nats-server writes for a stored message
// (stream.go, mset.pubAck): {"stream":"NAME","seq":N}, or with
// "domain":"D" before "seq". Anything else (an error, a duplicate, a
// counter's value, escapes in a name) is left to encoding/json.
func plainPubAck(b []byte) (uint64, bool) {
	rest, ok := bytes.CutPrefix(b, []byte(`{"stream":"`))
	if !ok {
		return 0, false
	}
	if rest, ok = skipName(rest); !ok {
		return 0, false
	}
	if r, ok := bytes.CutPrefix(rest, []byte(`,"domain":"`)); ok {
		if rest, ok = skipName(r); !ok {
			return 0, false
		}
	}
	if rest, ok = bytes.CutPrefix(rest, []byte(`,"seq":`)); !ok || len(rest) < 2 || len(rest) > 21 {
		return 0, false
	}
	var seq uint64
	for i, c := range rest {
		switch {
		case c >= '0' && c <= '9' && i < len(rest)-1:
			if seq > (1<<64-1-9)/10 {
				return 0, false
			}
			seq = seq*10 + uint64(c-'0')
		case c == '}' && i == len(rest)-1 && i > 0:
			return seq, true
		default:
			return 0, false
		}
	}
	return 0, false
}

// skipName passes a non-empty JSON string's contents without escapes and
// its closing quote.
func skipName(b []byte) ([]byte, bool) {
	end := bytes.IndexByte(b, '"')
	if end <= 0 || bytes.IndexByte(b[:end], '\\') >= 0 {
		return nil, false
	}
	return b[end+1:], true
}
