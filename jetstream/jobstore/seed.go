package jobstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetgate/jetgate/admission/ojs"
	"github.com/jetgate/jetgate/jetstream/topology"
)

// Seeds: an available job without a record (doc.go).
//
// A job enqueued as available is stored once, as its ready message on
// ojs.ready.<queue>.<priority>.<id>, whose body is the whole job (Internal
// included). Its record in OJS_JOBS is written first by the transition
// that takes it out of available (claim, cancel, PATCH, expiry, drop...):
// that transition reads the job from the ready message (a seed, Job.Seed)
// and writes the record expecting the subject's last sequence to be the
// seed's base revision, 0 when the id never had a record: create if
// absent, the one fence between racing claimers. Whoever writes first
// wins; every other ready message of the job is stale by its token.
//
// A record deleted by an operator leaves a deletion marker, which is not
// absence: a seed is only taken when the record's subject holds nothing,
// or the marker the enqueue met and named in the message (HeaderBaseRev),
// so a ready message older than the deletion never brings the job back.

// SeedMsg builds the ready message of a job enqueued without a record:
// the body is the job. j.Rev is the deletion marker the id's record
// subject holds (0: none). A client-named id's publish also expects the
// id's last ready message (expectLast), which the caller sets.
func SeedMsg(j *ojs.Job) (*nats.Msg, error) {
	b, err := j.AppendJSON(make([]byte, 0, 768))
	if err != nil {
		return nil, fmt.Errorf("encode job %s: %w", j.ID, err)
	}
	m := ReadyMsg(j)
	m.Data = b
	// No message id: a seed is published once (a retry after a lost
	// answer meets the first one as another ready message of the id), and
	// the server keeps no duplicate-window entry for it.
	m.Header.Del(jetstream.MsgIDHeader)
	return m, nil
}

// expectLast makes a ready message of job id expect the last ready
// message of the id to be at sequence last (0: none).
func expectLast(m *nats.Msg, id string, last uint64) {
	m.Header.Set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatUint(last, 10))
	m.Header.Set(jetstream.ExpectedLastSubjSeqSubjHeader, topology.ReadyIDFilter(id))
}

// PublishReadyNamed publishes the ready message of a new job that has a
// record (or is about to) and whose id a client chose: a job of that id
// stored as its ready message alone makes it a DuplicateError. It is a
// compare-and-swap on the id's ready messages: the last one is read, must
// not carry a job, and the publish expects it still to be the last. A
// message without a job is not a job: it may be this job's own from an
// attempt whose record was never written (a retry after a lost answer),
// which must not make the retry a duplicate.
func (s *Store) PublishReadyNamed(ctx context.Context, j *ojs.Job) error {
	if err := s.EnsureLevel(ctx, j.Queue, j.Priority); err != nil {
		return err
	}
	for range 4 {
		last, taken, err := s.lastReadyOfID(ctx, j.ID)
		if err != nil {
			return err
		}
		if taken {
			return &ojs.DuplicateError{ExistingID: j.ID}
		}
		m := ReadyMsg(j)
		expectLast(m, j.ID, last)
		ack, err := s.js.PublishMsg(ctx, m)
		if err == nil {
			s.noteReady(m.Subject, ack)
			return nil
		}
		if !wrongLastSeq(err) {
			return fmt.Errorf("publish ready %s: %w", j.ID, Unavailable(err))
		}
	}
	return fmt.Errorf("publish ready %s: %w: its ready messages kept changing", j.ID, ErrConflict)
}

// lastReadyOfID reads the last ready message of id: its sequence (0:
// none) and whether it carries a job (a seed: the id is taken).
func (s *Store) lastReadyOfID(ctx context.Context, id string) (uint64, bool, error) {
	m, err := s.assets.Ready.GetLastMsgForSubject(ctx, topology.ReadyIDFilter(id))
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
		return 0, false, nil
	case err != nil:
		return 0, false, fmt.Errorf("find ready job %s: %w", id, Unavailable(err))
	}
	return m.Sequence, SeedOf(m.Header, m.Data) != nil, nil
}

// CheckNoSeed is called after creating the records of new jobs that start
// without a ready message (scheduled, pending) under ids a client chose:
// an available job of such an id stored as its ready message alone makes
// the id taken, and the new records are removed again (RemoveRecords is
// the caller's for a batch). A seed enqueued after this check reads the
// record after its own publish and is refused itself.
func (s *Store) CheckNoSeed(ctx context.Context, jobs []*ojs.Job) error {
	if err := s.SeedTaken(ctx, jobs); err != nil {
		s.RemoveRecords(jobs)
		return err
	}
	return nil
}

// RemoveRecords removes the records of jobs just created and refused
// (their token still on them; jobs created after a seed of their id was
// checked for, CheckNoSeed). The marker it leaves says so (headerRefused):
// unlike a deletion's, it does not hide the seed that took the id, whose
// claim creates the record over it. Failures are left: such a record
// holds a job whose ready message or timer never came, as after a crash.
//
// The marker cannot tell a deletion it replaced: a ready message from
// before an operator deleted the id's finished job, met after a refused
// enqueue of the same id, would be taken for the job again. That needs a
// deletion, a late ready message and a race of two enqueues of the id.
func (s *Store) RemoveRecords(jobs []*ojs.Job) {
	ctx, cancel := context.WithTimeout(context.Background(), defaultWait)
	defer cancel()
	for _, j := range jobs {
		r, err := s.readRecord(ctx, j.ID)
		if err != nil || r.job == nil || r.job.Internal.Token != j.Internal.Token {
			continue
		}
		m := nats.NewMsg(recordSubject(j.ID))
		m.Header.Set("KV-Operation", "PURGE")
		m.Header.Set("Nats-Rollup", "sub")
		m.Header.Set(headerRefused, "1")
		m.Header.Set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatUint(r.rev, 10))
		_, _ = s.js.PublishMsg(ctx, m)
	}
}

// headerRefused marks the deletion marker RemoveRecords leaves.
const headerRefused = "Ojs-Refused"

// SeedTaken reports a DuplicateError when an id of jobs (new jobs that
// start with a record) is held by a job stored as its ready message
// alone. It is the check before the records are created; CheckNoSeed,
// after, settles races with a seed enqueued in between.
func (s *Store) SeedTaken(ctx context.Context, jobs []*ojs.Job) error {
	for _, j := range jobs {
		_, taken, err := s.lastReadyOfID(ctx, j.ID)
		if err != nil {
			return err
		}
		if taken {
			return &ojs.DuplicateError{ExistingID: j.ID}
		}
	}
	return nil
}

// PublishSeed stores a new available job as its ready message alone
// (j.Internal.Origin set to its token, so the records written after it
// are known as its own). A server-made id (fresh UUIDv7) is taken to be
// unique. A client's id is checked on both places a job of that id can
// be: no other ready message of the id (expected in the publish; one
// that holds no job is expected instead, freeID), then no record (read
// after the publish landed: a claim writes the record before it
// acknowledges the message, so a job claimed in between is seen by the
// read); a taken id is a DuplicateError and the message is removed again.
func (s *Store) PublishSeed(ctx context.Context, j *ojs.Job, clientID bool) error {
	j.Internal.Origin = j.Internal.Token
	var expect uint64 // the id's last ready message the publish expects
	for range 4 {
		m, err := SeedMsg(j)
		if err != nil {
			return err
		}
		if clientID {
			expectLast(m, j.ID, expect)
		}
		if err := s.EnsureLevel(ctx, j.Queue, j.Priority); err != nil {
			return err
		}
		ack, err := s.js.PublishMsg(ctx, m)
		if err != nil {
			if !wrongLastSeq(err) {
				return fmt.Errorf("publish ready %s: %w", j.ID, Unavailable(err))
			}
			last, free, ferr := s.freeID(ctx, j.ID)
			if ferr != nil {
				return ferr
			}
			if !free {
				return &ojs.DuplicateError{ExistingID: j.ID}
			}
			expect = last
			continue
		}
		s.noteReady(m.Subject, ack)
		if !clientID {
			return nil
		}
		r, err := s.readRecord(ctx, j.ID)
		if err != nil {
			// The job is stored and may be claimed already: it stays,
			// and the error (503) makes the client ask again, which
			// then finds the id taken by this very job.
			return err
		}
		switch {
		case r.job != nil && r.job.Internal.Origin == j.Internal.Origin:
			return nil // this job, claimed meanwhile
		case r.job != nil:
			s.removeReady(ack.Sequence)
			return &ojs.DuplicateError{ExistingID: j.ID}
		case r.marker == j.Rev || r.refused:
			return nil
		}
		// The id's record was deleted: the seed must name the marker, or
		// its claim could never create the record.
		s.removeReady(ack.Sequence)
		j.Rev = r.marker
	}
	return fmt.Errorf("enqueue %s: %w: its record kept changing", j.ID, ErrConflict)
}

// PublishSeedBatch stores new available jobs as their ready messages
// alone, all or none: one atomic batch on the ready stream (ADR-50). The
// messages of ids in named (ids a client chose) expect no other ready
// message of their id; once the batch landed, the record subjects of
// those ids are read: a record of another job makes the id taken
// (DuplicateError, and the batch's messages are removed again), and a
// deletion marker a seed does not name makes the batch go again, naming
// it.
func (s *Store) PublishSeedBatch(ctx context.Context, jobs []*ojs.Job, named map[string]bool) error {
	switch {
	case len(jobs) == 0:
		return nil
	case len(jobs) == 1:
		return s.PublishSeed(ctx, jobs[0], named[jobs[0].ID])
	case len(jobs) > MaxBatch:
		return &ojs.ValidationError{Field: "jobs", Rule: fmt.Sprintf("at most %d jobs", MaxBatch)}
	}
	var ids []string
	for _, j := range jobs {
		j.Internal.Origin = j.Internal.Token
		if named[j.ID] {
			ids = append(ids, j.ID)
		}
	}
	if len(ids) == 0 {
		// Ids the server made cannot be taken: no check inside the
		// batch, so no atomic batch either (batchmark.go).
		return s.publishMarkedBatch(ctx, jobs)
	}
	expect := map[string]uint64{} // ready messages of named ids that hold no job (freeID)
	for range 4 {
		msgs := make([]*nats.Msg, len(jobs))
		for i, j := range jobs {
			if err := s.EnsureLevel(ctx, j.Queue, j.Priority); err != nil {
				return err
			}
			m, err := SeedMsg(j)
			if err != nil {
				return err
			}
			if named[j.ID] {
				expectLast(m, j.ID, expect[j.ID])
			}
			msgs[i] = m
		}
		last, err := s.atomicBatch(ctx, msgs)
		if err != nil {
			if !wrongLastSeq(err) {
				return fmt.Errorf("publish batch: %w", Unavailable(err))
			}
			// Which id met another message, and does that one hold it?
			for _, id := range ids {
				seq, free, ferr := s.freeID(ctx, id)
				if ferr != nil {
					return ferr
				}
				if !free {
					return &ojs.DuplicateError{ExistingID: id}
				}
				expect[id] = seq
			}
			continue
		}
		first := last - uint64(len(jobs)) + 1
		for i, m := range msgs {
			s.noteReady(m.Subject, &jetstream.PubAck{Sequence: first + uint64(i)})
		}
		if len(ids) == 0 {
			return nil
		}
		reads, err := s.readRecords(ctx, ids)
		if err != nil {
			return err // stored, as in PublishSeed
		}
		again := false
		for _, j := range jobs {
			r, ok := reads[j.ID]
			switch {
			case !ok, r.job != nil && r.job.Internal.Origin == j.Internal.Origin, r.job == nil && (r.marker == j.Rev || r.refused):
			case r.job != nil:
				s.removeReadyRange(first, last)
				return &ojs.DuplicateError{ExistingID: j.ID}
			default:
				j.Rev, again = r.marker, true
			}
		}
		if !again {
			return nil
		}
		s.removeReadyRange(first, last)
	}
	return fmt.Errorf("enqueue batch: %w: its records kept changing", ErrConflict)
}

// removeReadyRange deletes the ready messages first..last (a batch).
func (s *Store) removeReadyRange(first, last uint64) {
	for seq := first; seq <= last; seq++ {
		s.removeReady(seq)
	}
}

// freeID settles a ready publish of a new job of id that met another
// ready message of the id: it reads the last one. A job stored as its
// ready message alone holds the id (free false), unless that seed can
// never be taken for its job (a record subject holding a marker it does
// not name: the id's job was deleted after it), which is removed. A
// message without a job holds the id only if the id has a record; without
// one it is a transition that never landed (an enqueue attempt whose
// record was never written, answered with an error), and the publish goes
// again expecting it (last).
func (s *Store) freeID(ctx context.Context, id string) (last uint64, free bool, err error) {
	m, err := s.assets.Ready.GetLastMsgForSubject(ctx, topology.ReadyIDFilter(id))
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
		return 0, true, nil // gone meanwhile: try again
	case err != nil:
		return 0, false, fmt.Errorf("find ready job %s: %w", id, Unavailable(err))
	}
	r, err := s.readRecord(ctx, id)
	if err != nil {
		return 0, false, err
	}
	seed := SeedOf(m.Header, m.Data)
	switch {
	case r.job != nil:
		return 0, false, nil
	case seed == nil:
		return m.Sequence, true, nil
	case r.marker == seed.Rev || r.refused:
		return 0, false, nil
	}
	if err := s.assets.Ready.DeleteMsg(ctx, m.Sequence); err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) {
		return 0, false, fmt.Errorf("remove dead ready message of %s: %w", id, Unavailable(err))
	}
	return 0, true, nil
}

// removeReady deletes a ready message by sequence; a failure leaves a
// message that matches no job (its claim finds a record or a marker).
func (s *Store) removeReady(seq uint64) {
	ctx, cancel := context.WithTimeout(context.Background(), defaultWait)
	defer cancel()
	_ = s.assets.Ready.DeleteMsg(ctx, seq)
}

// defaultWait bounds a clean-up made outside a caller's context.
const defaultWait = 5 * time.Second

// Seed reads the job a ready message carries, marked Seed at the base
// revision the message names; nil when it carries none (a message of a
// job that has a record).
func Seed(m jetstream.Msg) *ojs.Job {
	return SeedOf(m.Headers(), m.Data())
}

// SeedOf is Seed for a message read from the stream.
func SeedOf(h nats.Header, data []byte) *ojs.Job {
	ref, ok := Ref(h)
	if !ok || len(data) == 0 {
		return nil
	}
	var j ojs.Job
	if err := json.Unmarshal(data, &j); err != nil || j.ID != ref.JobID || j.Internal.Token != ref.Token {
		return nil
	}
	if j.State == "" {
		j.State = ojs.StateAvailable
	}
	j.Rev, j.Seed = ref.BaseRev, true
	return &j
}

// recordRead is what the record subject of a job holds: a record (job at
// rev), a deletion marker (marker, its sequence), or nothing.
type recordRead struct {
	job    *ojs.Job
	rev    uint64
	marker uint64
	// refused marks a marker left by RemoveRecords: no job was deleted,
	// an enqueue that lost the id to a seed took its record back.
	refused bool
}

// readRecord reads the last message on a job's record subject, telling a
// deletion marker from a subject that never held anything.
func (s *Store) readRecord(ctx context.Context, id string) (recordRead, error) {
	st, err := s.jobsStream(ctx)
	if err != nil {
		return recordRead{}, err
	}
	m, err := st.GetLastMsgForSubject(ctx, recordSubject(id))
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
		return recordRead{}, nil
	case err != nil:
		return recordRead{}, fmt.Errorf("get job %s: %w", id, Unavailable(err))
	}
	return decodeRecord(id, m.Sequence, m.Header, m.Data)
}

// decodeRecord reads the last message of a record subject.
func decodeRecord(id string, seq uint64, h nats.Header, data []byte) (recordRead, error) {
	// A delete or purge, or the marker the server leaves when a record's
	// retention TTL ends.
	if op := h.Get("KV-Operation"); op == "DEL" || op == "PURGE" || h.Get("Nats-Marker-Reason") != "" {
		return recordRead{marker: seq, refused: h.Get(headerRefused) != ""}, nil
	}
	var j ojs.Job
	if err := json.Unmarshal(data, &j); err != nil {
		return recordRead{}, fmt.Errorf("decode job %s: %w", id, err)
	}
	j.Rev = seq
	return recordRead{job: &j, rev: seq}, nil
}

// jobsStream is the stream behind bucket OJS_JOBS, bound on first use (its
// direct-get setting is the bucket's, set by topology.Ensure).
func (s *Store) jobsStream(ctx context.Context) (jetstream.Stream, error) {
	s.jobsMu.Lock()
	defer s.jobsMu.Unlock()
	if s.jobs != nil {
		return s.jobs, nil
	}
	st, err := s.js.Stream(ctx, "KV_"+topology.JobsBucket)
	if err != nil {
		return nil, fmt.Errorf("bind jobs stream: %w", Unavailable(err))
	}
	s.jobs = st
	return st, nil
}

// readySeed looks up the last ready message of id (ojs.ready.*.*.<id>)
// and returns the job it carries, if it is a seed for the record subject
// as read in r (nothing, or the marker the seed names, or a marker of a
// refused enqueue), at the revision its record's creation must expect.
func (s *Store) readySeed(ctx context.Context, id string, r recordRead) (*ojs.Job, error) {
	m, err := s.assets.Ready.GetLastMsgForSubject(ctx, topology.ReadyIDFilter(id))
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("find ready job %s: %w", id, Unavailable(err))
	}
	j := SeedOf(m.Header, m.Data)
	if j == nil || (j.Rev != r.marker && !r.refused) {
		return nil, nil
	}
	if b := BatchOf(m.Header); b != "" {
		// A seed of a batch not committed is not a job (yet).
		state, err := s.SeedBatch(ctx, b)
		if err != nil {
			return nil, err
		}
		if state != BatchCommitted {
			return nil, nil
		}
	}
	j.Rev = r.marker
	return j, nil
}
