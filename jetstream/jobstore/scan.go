package jobstore

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetgate/jetgate/admission/ojs"
	"github.com/jetgate/jetgate/jetstream/topology"
)

// Scans read the messages of a stream in sequence order from a position,
// for operator listings (admission/admin). They write nothing, so a listing
// adds no stored message to any job's life, and they create no consumer:
// the ready stream is a work queue, whose consumers may not overlap, so an
// ordered consumer over it would be refused. They read with batched direct
// gets (next by subject, ADR-31) where the stream answers them consistently
// (one replica, direct gets on), and one message get per message otherwise.

// ScanBatch is how many messages one batched direct get asks for.
const ScanBatch = 256

// ScanPos is where a scan stopped: Next is the sequence to go on from, and
// Done says no message matching the filter was stored after the last one
// read when it was read.
type ScanPos struct {
	Next uint64
	Done bool
	// Read counts the messages read.
	Read int
}

// ReadyEntry is one ready message met by ScanReady.
type ReadyEntry struct {
	Seq uint64
	Ref MsgRef
	// Job is the job the message carries when its body holds one (a ready
	// message that is the job's record), nil when it carries only headers.
	Job *ojs.Job
}

// ScanReady reads the ready messages of a queue ("" = every queue) stored
// at or after sequence from, at most max of them, and calls fn with each
// until fn returns false.
func (s *Store) ScanReady(ctx context.Context, queue string, from uint64, max int, fn func(ReadyEntry) bool) (ScanPos, error) {
	filter := topology.ReadySubjects
	if queue != "" {
		filter = topology.ReadyQueueFilter(queue)
	}
	return s.scan(ctx, s.assets.Ready, topology.ReadyStream, filter, from, max, func(m *jetstream.RawStreamMsg) bool {
		ref, ok := Ref(m.Header)
		if !ok {
			return true
		}
		e := ReadyEntry{Seq: m.Sequence, Ref: ref}
		if len(m.Data) > 0 {
			var j ojs.Job
			if json.Unmarshal(m.Data, &j) == nil && j.ID == ref.JobID {
				e.Job = &j
			}
		}
		return fn(e)
	})
}

// RecordEntry is one job record met by ScanRecords.
type RecordEntry struct {
	Seq uint64
	Job *ojs.Job
}

// ScanRecords reads the job records of bucket OJS_JOBS stored at or after
// sequence from, at most max messages, and calls fn with each record until
// fn returns false. The bucket keeps one message per key, so the records
// come in the order of their last change; deletion and expiry markers are
// read (they count in max) but not passed on.
func (s *Store) ScanRecords(ctx context.Context, from uint64, max int, fn func(RecordEntry) bool) (ScanPos, error) {
	stream := "KV_" + topology.JobsBucket
	st, err := s.js.Stream(ctx, stream)
	if err != nil {
		return ScanPos{}, fmt.Errorf("scan job records: %w", Unavailable(err))
	}
	prefix := "$KV." + topology.JobsBucket + "."
	return s.scan(ctx, st, stream, prefix+">", from, max, func(m *jetstream.RawStreamMsg) bool {
		if len(m.Data) == 0 || m.Header.Get("KV-Operation") != "" {
			return true
		}
		var j ojs.Job
		if err := json.Unmarshal(m.Data, &j); err != nil || j.ID != strings.TrimPrefix(m.Subject, prefix) {
			return true
		}
		j.Rev = m.Sequence
		return fn(RecordEntry{Seq: m.Sequence, Job: &j})
	})
}

// scan reads the messages of stream on filter from sequence from on.
func (s *Store) scan(ctx context.Context, st jetstream.Stream, name, filter string, from uint64, max int,
	fn func(*jetstream.RawStreamMsg) bool) (ScanPos, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
	}
	pos := ScanPos{Next: max1(from)}
	cfg := st.CachedInfo().Config
	direct := cfg.AllowDirect && cfg.Replicas <= 1
	for pos.Read < max {
		var (
			msgs []*jetstream.RawStreamMsg
			left uint64
			err  error
		)
		if direct {
			msgs, left, err = s.directBatch(ctx, name, filter, pos.Next, min(ScanBatch, max-pos.Read))
		} else {
			msgs, left, err = getNext(ctx, st, filter, pos.Next)
		}
		if err != nil {
			return pos, fmt.Errorf("scan %s: %w", name, Unavailable(err))
		}
		for i, m := range msgs {
			pos.Read++
			pos.Next = m.Sequence + 1
			if !fn(m) {
				pos.Done = i == len(msgs)-1 && left == 0
				return pos, nil
			}
		}
		if len(msgs) == 0 || left == 0 {
			pos.Done = true
			return pos, nil
		}
	}
	return pos, nil
}

func max1(v uint64) uint64 { return max(v, 1) }

// getNext reads the next message on filter at or after seq with a message
// get through the stream leader; left is 1 when one was found (more may
// follow), 0 when none.
func getNext(ctx context.Context, st jetstream.Stream, filter string, seq uint64) ([]*jetstream.RawStreamMsg, uint64, error) {
	m, err := st.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(filter))
	if err != nil {
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return nil, 0, nil
		}
		return nil, 0, err
	}
	return []*jetstream.RawStreamMsg{m}, 1, nil
}

// directBatch asks stream for up to n messages on filter from sequence seq
// (a batched direct get); left is the number of matching messages the end
// of the batch says remain.
func (s *Store) directBatch(ctx context.Context, stream, filter string, seq uint64, n int) ([]*jetstream.RawStreamMsg, uint64, error) {
	body := fmt.Sprintf(`{"seq":%d,"next_by_subj":%q,"batch":%d}`, seq, filter, n)
	return s.directGetLeft(ctx, stream, []byte(body))
}

// directGet sends a batched direct get and returns its messages.
func (s *Store) directGet(ctx context.Context, stream string, body []byte) ([]*jetstream.RawStreamMsg, error) {
	msgs, _, err := s.directGetLeft(ctx, stream, body)
	return msgs, err
}

// directGetLeft sends a batched direct get (ADR-31) and returns its
// messages and the number of matching messages the end of the batch says
// remain.
func (s *Store) directGetLeft(ctx context.Context, stream string, body []byte) ([]*jetstream.RawStreamMsg, uint64, error) {
	return s.directGetUpTo(ctx, stream, body, ScanBatch)
}

// directGetUpTo is directGetLeft for an answer of at most n messages.
func (s *Store) directGetUpTo(ctx context.Context, stream string, body []byte, n int) ([]*jetstream.RawStreamMsg, uint64, error) {
	inbox := s.nc.NewInbox()
	// A channel the size of an answer (at most n messages and the end of
	// the batch), not a sync subscription's default of 64k slots.
	ch := make(chan *nats.Msg, n+2)
	sub, err := s.nc.ChanSubscribe(inbox, ch)
	if err != nil {
		return nil, 0, err
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := s.nc.PublishRequest("$JS.API.DIRECT.GET."+stream, inbox, body); err != nil {
		return nil, 0, err
	}
	var out []*jetstream.RawStreamMsg
	for {
		var msg *nats.Msg
		select {
		case msg = <-ch:
		case <-ctx.Done():
			return nil, 0, ctx.Err()
		}
		switch status := msg.Header.Get("Status"); status {
		case "":
			m, err := rawMsg(msg)
			if err != nil {
				return nil, 0, err
			}
			out = append(out, m)
		case "204": // end of batch
			left, _ := strconv.ParseUint(msg.Header.Get("Nats-Num-Pending"), 10, 64)
			return out, left, nil
		case "404":
			return out, 0, nil
		default:
			return nil, 0, fmt.Errorf("batched direct get: status %s %s", status, msg.Header.Get("Description"))
		}
	}
}

// rawMsg turns one message of a direct get answer into a stream message.
func rawMsg(msg *nats.Msg) (*jetstream.RawStreamMsg, error) {
	seq, err := strconv.ParseUint(msg.Header.Get(jetstream.SequenceHeader), 10, 64)
	if err != nil {
		return nil, fmt.Errorf("direct get answer without a sequence: %w", err)
	}
	m := &jetstream.RawStreamMsg{
		Subject:  msg.Header.Get(jetstream.SubjectHeader),
		Sequence: seq,
		Header:   msg.Header,
		Data:     msg.Data,
	}
	if ts, err := time.Parse(time.RFC3339Nano, msg.Header.Get(jetstream.TimeStampHeaer)); err == nil {
		m.Time = ts
	}
	return m, nil
}

// GetMany reads the records of ids; ids without a record are left out of
// the answer (a job stored as its ready message alone included).
func (s *Store) GetMany(ctx context.Context, ids []string) (map[string]*ojs.Job, error) {
	reads, err := s.readRecords(ctx, ids)
	if err != nil {
		return nil, err
	}
	out := make(map[string]*ojs.Job, len(reads))
	for id, r := range reads {
		if r.job != nil {
			out[id] = r.job
		}
	}
	return out, nil
}

// readRecords reads the record subjects of ids (readRecord); ids whose
// subject holds nothing are left out. Where the bucket answers direct
// gets consistently it is one batched direct get (multi_last on the ids'
// subjects) per ScanBatch ids, otherwise one read per id, several at once.
func (s *Store) readRecords(ctx context.Context, ids []string) (map[string]recordRead, error) {
	out := make(map[string]recordRead, len(ids))
	stream := "KV_" + topology.JobsBucket
	st, err := s.jobsStream(ctx)
	if err != nil {
		return nil, err
	}
	cfg := st.CachedInfo().Config
	if !cfg.AllowDirect || cfg.Replicas > 1 {
		var mu sync.Mutex
		var firstErr error
		sem := make(chan struct{}, 16)
		var wg sync.WaitGroup
		for _, id := range ids {
			if !validKey(id) {
				continue
			}
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				r, err := s.readRecord(ctx, id)
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err != nil:
					firstErr = cmp.Or(firstErr, err)
				case r.job != nil || r.marker != 0:
					out[id] = r
				}
			}()
		}
		wg.Wait()
		return out, firstErr
	}
	prefix := "$KV." + topology.JobsBucket + "."
	for len(ids) > 0 {
		n := min(len(ids), ScanBatch)
		subjects := make([]string, 0, n)
		for _, id := range ids[:n] {
			if validKey(id) {
				subjects = append(subjects, prefix+id)
			}
		}
		ids = ids[n:]
		if len(subjects) == 0 {
			continue
		}
		body, _ := json.Marshal(struct {
			MultiLast []string `json:"multi_last"`
		}{subjects})
		msgs, err := s.directGet(ctx, stream, body)
		if err != nil {
			return nil, fmt.Errorf("read job records: %w", Unavailable(err))
		}
		for _, m := range msgs {
			id := strings.TrimPrefix(m.Subject, prefix)
			r, err := decodeRecord(id, m.Sequence, m.Header, m.Data)
			if err != nil {
				return nil, err
			}
			out[id] = r
		}
	}
	return out, nil
}
