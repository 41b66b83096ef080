package jobstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/jetgate/jetgate/admission/ojs"
	"github.com/jetgate/jetgate/jetstream/topology"
)

// Headers carried by ready messages and timers.
const (
	HeaderJobID = "Ojs-Job-Id"
	HeaderToken = "Ojs-Token"
	// HeaderBaseRev is the record revision the transition that published
	// a ready message replaces: while the record is still at it, the
	// transition is in flight (the message is published before the
	// compare-and-swap), and the message is early, not stale.
	HeaderBaseRev = "Ojs-Base-Rev"
)

// ErrConflict is returned by Update when the record changed since it was
// read: the caller lost a compare-and-swap race and must re-read.
var ErrConflict = errors.New("job record changed concurrently")

// Store reads and writes job records and publishes their messages.
type Store struct {
	nc     *nats.Conn
	js     jetstream.JetStream
	assets *topology.Assets
	// pulls receives the answers of PullNoWait (pull.go).
	pulls  pullMux
	levels levelRegistry // registry.go
	// jobs is the stream behind bucket OJS_JOBS (seed.go).
	jobsMu sync.Mutex
	jobs   jetstream.Stream
	// committed remembers batches known committed (batchmark.go).
	committed committedBatches
	window    atomic.Int64 // SetBatchWindow
}

// New returns a Store over assets created by topology.Ensure.
func New(nc *nats.Conn, js jetstream.JetStream, assets *topology.Assets) *Store {
	return &Store{nc: nc, js: js, assets: assets}
}

// NewToken returns a fresh transition token.
func NewToken() string { return nuid.Next() }

// Get reads a job: its record at its revision, or, for an available job
// that has none yet, the seed its ready message carries (seed.go; Seed
// set, revision its base). The record is read first, then the ready
// stream, then the record again: a claim creates the record before it
// acknowledges the ready message, so a job claimed between the first two
// reads is found by the third.
func (s *Store) Get(ctx context.Context, id string) (*ojs.Job, uint64, error) {
	if !validKey(id) {
		return nil, 0, &ojs.NotFoundError{Resource: "job", ID: id}
	}
	for try := range 2 {
		r, err := s.readRecord(ctx, id)
		if err != nil {
			return nil, 0, err
		}
		if r.job != nil {
			return r.job, r.rev, nil
		}
		if try == 1 {
			break
		}
		seed, err := s.readySeed(ctx, id, r)
		if err != nil {
			return nil, 0, err
		}
		if seed != nil {
			return seed, seed.Rev, nil
		}
	}
	return nil, 0, &ojs.NotFoundError{Resource: "job", ID: id}
}

// Create writes a new job record; an existing id is a DuplicateError.
func (s *Store) Create(ctx context.Context, j *ojs.Job) (uint64, error) {
	buf, err := encodeRecord(j)
	if err != nil {
		return 0, err
	}
	defer ojs.PutBuffer(buf)
	rev, err := s.publish(ctx, recordMsg(j, *buf, 0, 0))
	if wrongLastSeq(err) {
		// The subject holds a record (the id is taken) or a deletion
		// marker, which a create replaces at the marker's sequence, as
		// the KV API's Create does.
		r, rerr := s.readRecord(ctx, j.ID)
		if rerr != nil {
			return 0, rerr
		}
		if r.marker != 0 {
			rev, err = s.publish(ctx, recordMsg(j, *buf, r.marker, 0))
		}
	}
	if err != nil {
		if wrongLastSeq(err) {
			return 0, &ojs.DuplicateError{ExistingID: j.ID}
		}
		return 0, fmt.Errorf("create job %s: %w", j.ID, Unavailable(err))
	}
	return rev, nil
}

// Update writes j if the record is still at revision rev.
func (s *Store) Update(ctx context.Context, j *ojs.Job, rev uint64) (uint64, error) {
	return s.UpdateTTL(ctx, j, rev, 0)
}

// UpdateTTL writes j if the record is still at revision rev, and lets
// JetStream remove the record ttl later (per-message TTL); a later write
// replaces the TTL. It is how finished jobs are kept for a retention
// period without any sweep. A ttl of 0 keeps the record.
func (s *Store) UpdateTTL(ctx context.Context, j *ojs.Job, rev uint64, ttl time.Duration) (uint64, error) {
	buf, err := encodeRecord(j)
	if err != nil {
		return 0, err
	}
	defer ojs.PutBuffer(buf)
	nrev, err := s.publish(ctx, recordMsg(j, *buf, rev, ttl))
	if err != nil {
		if wrongLastSeq(err) {
			return 0, ErrConflict
		}
		return 0, fmt.Errorf("update job %s: %w", j.ID, Unavailable(err))
	}
	return nrev, nil
}

// recordSubject is the subject of job id's record in the jobs bucket.
func recordSubject(id string) string { return "$KV." + topology.JobsBucket + "." + id }

// recordMsg is a write of job j's record that JetStream stores only if
// the record's last revision is rev (0: if it has none), as the KV API's
// Update would; a ttl above 0 lets JetStream remove the record ttl later.
// It carries the record's summary (HeaderStat).
func recordMsg(j *ojs.Job, record []byte, rev uint64, ttl time.Duration) *nats.Msg {
	m := nats.NewMsg(recordSubject(j.ID))
	m.Data = record
	m.Header.Set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatUint(rev, 10))
	m.Header.Set(HeaderStat, StatOf(j).String())
	if ttl > 0 {
		m.Header.Set(jetstream.MsgTTLHeader, ttl.Round(time.Second).String())
	}
	return m
}

// encodeRecord encodes j into a pooled buffer (ojs.GetBuffer) for Create
// and UpdateTTL, which put it back when the publish that sends it
// returns: nats.go copies a message's data into the connection's write
// buffer before a request returns (natsWriter.appendBufs), and
// Store.publish, which sends both (its retries included), keeps no
// reference to the message, so nothing refers to the buffer after it.
func encodeRecord(j *ojs.Job) (*[]byte, error) {
	buf := ojs.GetBuffer()
	b, err := j.AppendJSON(*buf)
	if err != nil {
		ojs.PutBuffer(buf)
		return nil, fmt.Errorf("encode job %s: %w", j.ID, err)
	}
	*buf = b
	return buf, nil
}

// Delete removes a job record if it is still at revision rev.
func (s *Store) Delete(ctx context.Context, id string, rev uint64) error {
	if err := s.assets.Jobs.Purge(ctx, id, jetstream.LastRevision(rev)); err != nil {
		if errors.Is(err, jetstream.ErrKeyRevisionMismatch) || errors.Is(err, jetstream.ErrKeyExists) {
			return ErrConflict
		}
		return fmt.Errorf("delete job %s: %w", id, Unavailable(err))
	}
	return nil
}

// ReadyMsg builds the ready message of a job in its current state.
func ReadyMsg(j *ojs.Job) *nats.Msg {
	m := nats.NewMsg(topology.ReadySubject(j.Queue, j.Priority, j.ID))
	m.Header.Set(HeaderJobID, j.ID)
	m.Header.Set(HeaderToken, j.Internal.Token)
	m.Header.Set(jetstream.MsgIDHeader, j.ID+":"+j.Internal.Token)
	if j.Rev > 0 {
		m.Header.Set(HeaderBaseRev, strconv.FormatUint(j.Rev, 10))
	}
	return m
}

// PublishReady publishes the ready message of j (carrying j's token) and
// waits for JetStream to store it.
func (s *Store) PublishReady(ctx context.Context, j *ojs.Job) error {
	if err := s.publishReady(ctx, j.Queue, j.Priority, ReadyMsg(j)); err != nil {
		return fmt.Errorf("publish ready %s: %w", j.ID, Unavailable(err))
	}
	return nil
}

// SetTimer schedules a timer of kind for job id at time at, carrying token
// and the headers of kv (name, value, name, value ...), which the fired
// message carries too. A later SetTimer of the same kind and job replaces
// it.
func (s *Store) SetTimer(ctx context.Context, kind, id, token string, at time.Time, kv ...string) error {
	if _, err := s.publish(ctx, timerMsg(kind, id, token, at, kv...)); err != nil {
		return fmt.Errorf("set %s timer of %s: %w", kind, id, Unavailable(err))
	}
	return nil
}

// SetJobTimer schedules a timer of kind for the record j is about to be
// written as, at time at: it carries j's token and the revision j
// replaces, so a timer that fires before the record is written is told
// apart from a stale one (see HeaderBaseRev).
func (s *Store) SetJobTimer(ctx context.Context, kind string, j *ojs.Job, at time.Time, kv ...string) error {
	m := timerMsg(kind, j.ID, j.Internal.Token, at, kv...)
	if j.Rev > 0 {
		m.Header.Set(HeaderBaseRev, strconv.FormatUint(j.Rev, 10))
	}
	if _, err := s.publish(ctx, m); err != nil {
		return fmt.Errorf("set %s timer of %s: %w", kind, j.ID, Unavailable(err))
	}
	return nil
}

// SendTimerData schedules a timer like SetTimer whose message carries
// data as its body (the fired message carries it too), without waiting:
// JetStream's answer goes to reply (read it with PubAckError). The
// message goes out on the store's connection after every message
// published on it before, and before every later one.
func (s *Store) SendTimerData(kind, id, token string, at time.Time, data []byte, reply string) error {
	m := timerMsg(kind, id, token, at)
	m.Data, m.Reply = data, reply
	if err := s.nc.PublishMsg(m); err != nil {
		return fmt.Errorf("send %s timer of %s: %w", kind, id, Unavailable(err))
	}
	return nil
}

// PubAckError reads JetStream's answer to a publish sent with a reply
// subject: nil if the message was stored.
func PubAckError(m *nats.Msg) error {
	if status := m.Header.Get("Status"); status != "" {
		return fmt.Errorf("publish answered %s %s", status, m.Header.Get("Description"))
	}
	_, err := readPubAck(m.Data)
	return err
}

// CreateTimer schedules a timer like SetTimer unless one of kind is
// already scheduled for the job; it reports whether it wrote one.
func (s *Store) CreateTimer(ctx context.Context, kind, id, token string, at time.Time, kv ...string) (bool, error) {
	m := timerMsg(kind, id, token, at, kv...)
	m.Header.Set(jetstream.ExpectedLastSubjSeqHeader, "0")
	if _, err := s.publish(ctx, m); err != nil {
		if wrongLastSeq(err) {
			return false, nil
		}
		return false, fmt.Errorf("set %s timer of %s: %w", kind, id, Unavailable(err))
	}
	return true, nil
}

// timerMsg is the schedule of a timer of kind for job id at time at, or
// at ojs.LatestTime when at is later: JetStream keeps a schedule's time in
// int64 nanoseconds, and a later one would wrap around and fire at once.
func timerMsg(kind, id, token string, at time.Time, kv ...string) *nats.Msg {
	at = ojs.Schedulable(at)
	m := nats.NewMsg(topology.TimerSchedule(kind, id))
	m.Header.Set(jetstream.ScheduleHeader, "@at "+at.UTC().Format(time.RFC3339Nano))
	m.Header.Set(jetstream.ScheduleTargetHeader, topology.TimerFired(kind))
	m.Header.Set(HeaderJobID, id)
	m.Header.Set(HeaderToken, token)
	for i := 0; i+1 < len(kv); i += 2 {
		m.Header.Set(kv[i], kv[i+1])
	}
	return m
}

// CancelTimer stops a pending timer early. It does not wait: a timer that
// fires anyway carries a stale token and is dropped by its consumer.
func (s *Store) CancelTimer(kind, id string) {
	m := nats.NewMsg(topology.TimerCancelSubject)
	m.Header.Set(jetstream.ScheduleNextHeader, "purge")
	m.Header.Set(jetstream.SchedulerHeader, topology.TimerSchedule(kind, id))
	m.Header.Set(jetstream.MsgTTLHeader, "10s")
	_ = s.nc.PublishMsg(m)
}

// AckHeld acknowledges a held ready message by its ack subject. Any
// process may do it; it does not wait, since a lost ack only brings the
// message back, where it is recognised as stale.
func (s *Store) AckHeld(reply string) {
	if reply != "" {
		_ = s.nc.Publish(reply, []byte("+ACK"))
	}
}

// EnsureTimer schedules a timer like SetTimer unless one carrying token is
// already scheduled for the job (a heartbeat may have pushed it later),
// and reports whether it wrote one.
// The check and the write are one compare-and-swap on the schedule
// subject's last sequence.
func (s *Store) EnsureTimer(ctx context.Context, kind, id, token string, at time.Time, kv ...string) (wrote bool, err error) {
	subj := topology.TimerSchedule(kind, id)
	for range 4 {
		var last uint64
		m, err := s.assets.Timers.GetLastMsgForSubject(ctx, subj)
		switch {
		case err == nil:
			if m.Header.Get(HeaderToken) == token {
				return false, nil
			}
			last = m.Sequence
		case errors.Is(err, jetstream.ErrMsgNotFound):
		default:
			return false, fmt.Errorf("read %s timer of %s: %w", kind, id, Unavailable(err))
		}
		msg := timerMsg(kind, id, token, at, kv...)
		msg.Header.Set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatUint(last, 10))
		_, err = s.publish(ctx, msg)
		if err == nil {
			return true, nil
		}
		if !wrongLastSeq(err) {
			return false, fmt.Errorf("set %s timer of %s: %w", kind, id, Unavailable(err))
		}
	}
	return false, fmt.Errorf("set %s timer of %s: %w", kind, id, ErrConflict)
}

// MsgRef is the job a ready message or timer points at.
type MsgRef struct {
	JobID string
	Token string
	// BaseRev is HeaderBaseRev, or 0.
	BaseRev uint64
}

// Ref reads the job reference of a ready message or fired timer.
func Ref(h nats.Header) (MsgRef, bool) {
	r := MsgRef{JobID: h.Get(HeaderJobID), Token: h.Get(HeaderToken)}
	if v := h.Get(HeaderBaseRev); v != "" {
		r.BaseRev, _ = strconv.ParseUint(v, 10, 64)
	}
	return r, r.JobID != "" && r.Token != ""
}

// validKey reports whether id can be a KV key; ids are UUIDs, so anything
// else is simply not found.
func validKey(id string) bool {
	if id == "" || len(id) > 128 {
		return false
	}
	return !strings.ContainsAny(id, " \t\r\n*>.")
}

// Unavailable marks transport failures (closed connection, timeouts,
// cancellation, no responders) as ojs.ErrUnavailable, so httpbind answers
// 503 retryable, and a message over the server's max_payload as
// ojs.ErrTooLarge (413, not retryable); other errors pass through
// unchanged.
func Unavailable(err error) error {
	if errors.Is(err, nats.ErrMaxPayload) {
		// A message over the server's max_payload: no retry will store
		// it (413). Admission keeps job records within their budget
		// (ojs.PayloadLimits), so this is only a backstop.
		return fmt.Errorf("%w: %w", ojs.ErrTooLarge, err)
	}
	if errors.Is(err, nats.ErrConnectionClosed) || errors.Is(err, nats.ErrTimeout) ||
		errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) ||
		errors.Is(err, nats.ErrNoResponders) || errors.Is(err, jetstream.ErrNoStreamResponse) {
		return fmt.Errorf("%w: %w", ojs.ErrUnavailable, err)
	}
	return err
}

// wrongLastSeq reports a publish refused because the subject's last
// sequence was not the expected one: a lost compare-and-swap. Replicated
// streams report it with a different code than single replicas.
func wrongLastSeq(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
		apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant)
}
