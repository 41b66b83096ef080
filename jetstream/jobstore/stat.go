package jobstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetgate/jetgate/admission/ojs"
	"github.com/jetgate/jetgate/jetstream/topology"
)

// HeaderStat summarizes a record on every write of it, so that a reader
// that follows the jobs bucket without the records' bodies (a consumer
// with headers only: admission's count keeper) knows where the job
// stands: "<state> <priority> <held since> <queue token>", held since
// being the start of the attempt in Unix milliseconds while the attempt
// holds its ready message (Internal.HeldAck), 0 otherwise; an available
// job's adds " <token>" (a parked job's waiter carries it). About 40
// bytes per stored record, 60 for an available one; no message of its
// own.
const HeaderStat = "Ojs-Stat"

// RecordStat is what HeaderStat says of a record.
type RecordStat struct {
	State    ojs.State
	Priority int
	// HeldSince is the attempt's start (Unix ms) while the job is active
	// and holds the ready message it was claimed from; 0 otherwise.
	HeldSince int64
	// Queue is the job's queue as a subject token (topology.Token).
	Queue string
	// Token is an available job's token (Internal.Token); "" otherwise.
	Token string
}

// StatOf summarizes j.
func StatOf(j *ojs.Job) RecordStat {
	st := RecordStat{State: j.State, Priority: j.Priority, Queue: topology.Token(j.Queue)}
	switch {
	case j.State == ojs.StateActive && j.Internal.HeldAck != "" && j.StartedAt != nil:
		st.HeldSince = j.StartedAt.UnixMilli()
	case j.State == ojs.StateAvailable:
		st.Token = j.Internal.Token
	}
	return st
}

// String is the header's value.
func (st RecordStat) String() string {
	b := make([]byte, 0, 32+len(st.Queue))
	b = append(b, st.State...)
	b = append(b, ' ')
	b = strconv.AppendInt(b, int64(st.Priority), 10)
	b = append(b, ' ')
	b = strconv.AppendInt(b, st.HeldSince, 10)
	b = append(b, ' ')
	b = append(b, st.Queue...)
	if st.Token != "" {
		b = append(b, ' ')
		b = append(b, st.Token...)
	}
	return string(b)
}

// ParseStat reads a HeaderStat value; false for anything else.
func ParseStat(v string) (RecordStat, bool) {
	f := strings.Fields(v)
	if len(f) != 4 && len(f) != 5 {
		return RecordStat{}, false
	}
	prio, err := strconv.Atoi(f[1])
	if err != nil {
		return RecordStat{}, false
	}
	held, err := strconv.ParseInt(f[2], 10, 64)
	if err != nil {
		return RecordStat{}, false
	}
	st := RecordStat{State: ojs.State(f[0]), Priority: prio, HeldSince: held, Queue: f[3]}
	if len(f) == 5 {
		st.Token = f[4]
	}
	return st, true
}

// MaxLastPerSubject is how many subjects LastPerSubject answers for: the
// server's limit of one batched direct get with multi_last.
const MaxLastPerSubject = 1024

// LastPerSubject reads the last message of every subject of stream that
// matches filter, with one batched direct get (ADR-31). The server walks
// the matching subjects of its subject tree, so the cost follows their
// number, not the stream's messages. More than MaxLastPerSubject matching
// subjects is an error (the server's 413).
func (s *Store) LastPerSubject(ctx context.Context, stream, filter string) ([]*jetstream.RawStreamMsg, error) {
	body, err := json.Marshal(struct {
		MultiLast []string `json:"multi_last"`
	}{[]string{filter}})
	if err != nil {
		return nil, err
	}
	msgs, _, err := s.directGetUpTo(ctx, stream, body, MaxLastPerSubject)
	if err != nil {
		return nil, fmt.Errorf("last messages of %s on %s: %w", stream, filter, Unavailable(err))
	}
	return msgs, nil
}

// RecordID returns the job id of a record subject of the jobs bucket.
func RecordID(subject string) (string, bool) {
	return strings.CutPrefix(subject, recordSubject(""))
}

// RecordGone reports whether a record message with headers h ends the
// record: a delete, a purge, or the marker the server leaves when a
// finished record's retention TTL ends.
func RecordGone(h nats.Header) bool {
	op := h.Get("KV-Operation")
	return op == "DEL" || op == "PURGE" || h.Get("Nats-Marker-Reason") != ""
}

// StatAt summarizes the record message of job id at stream sequence seq
// by reading it whole: for a record written without HeaderStat (by a
// jetgate older than the header). ok is false when that message is gone
// (written over since) or ends the record.
func (s *Store) StatAt(ctx context.Context, id string, seq uint64) (st RecordStat, ok bool, err error) {
	js, err := s.jobsStream(ctx)
	if err != nil {
		return st, false, err
	}
	m, err := js.GetMsg(ctx, seq)
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
		return st, false, nil
	case err != nil:
		return st, false, fmt.Errorf("get job %s at %d: %w", id, seq, Unavailable(err))
	case m.Subject != recordSubject(id):
		return st, false, nil
	}
	r, err := decodeRecord(id, m.Sequence, m.Header, m.Data)
	if err != nil || r.job == nil {
		return st, false, err
	}
	return StatOf(r.job), true, nil
}
