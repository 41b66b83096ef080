package cron

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetgate/jetgate/admission/ojs"
	"github.com/jetgate/jetgate/jetstream/jobstore"
	"github.com/jetgate/jetgate/jetstream/topology"
)

// errBusy is a definition whose compare-and-swap kept losing.
var errBusy = errors.New("cron job changed by other processes")

// fire runs the tick at time tick of registration gen of cron job name:
// enqueue its job unless the tick already ran (or is skipped), then
// advance the definition to its next tick with a compare-and-swap, then
// schedule that tick. Every step is safe to repeat; see the package doc.
func (s *Scheduler) fire(ctx context.Context, name, gen string, tick time.Time) error {
	for range 5 {
		r, rev, err := s.load(ctx, name)
		if errors.Is(err, ojs.ErrNotFound) {
			return nil // deleted: its ticks are dropped
		}
		if err != nil {
			return err
		}
		if r.Gen != gen || r.NextRunAt == nil {
			return nil // a tick of an earlier registration of the name
		}
		if !r.NextRunAt.Equal(tick) {
			// The tick ran and the definition moved on; a process may
			// have stopped before writing the next tick's schedule.
			return s.ensureSchedule(ctx, r)
		}
		sched, loc, err := r.schedule()
		if err != nil {
			return nil // cannot happen: validated at registration
		}
		id, err := s.run(ctx, r, tick)
		if err != nil {
			return err
		}
		nr := *r
		if id != "" {
			nr.LastRunAt, nr.LastJobID = ojs.NewTime(tick), id
		}
		nr.NextRunAt = nil
		if next := s.after(sched, loc, tick); !next.IsZero() {
			nr.NextRunAt = ojs.NewTime(next)
		}
		b, err := json.Marshal(&nr)
		if err != nil {
			return err
		}
		if _, err := s.kv.Update(ctx, topology.Token(name), b, rev); err != nil {
			if casLost(err) || errors.Is(err, jetstream.ErrKeyNotFound) {
				continue // advanced, deleted or replaced meanwhile: look again
			}
			return fmt.Errorf("advance cron job %s: %w", name, jobstore.Unavailable(err))
		}
		if s.afterAdvance != nil {
			if err := s.afterAdvance(); err != nil {
				return err // a test stopping the handler here
			}
		}
		return s.schedule(ctx, &nr)
	}
	return errBusy
}

// run enqueues the job of a tick and returns its id, or "" when the tick
// is skipped. A tick whose job exists already (enqueued by a process that
// stopped before advancing the definition, or by a racing redelivery) is
// not enqueued again: the job id is derived from the tick, and the job
// record is created expecting none.
func (s *Scheduler) run(ctx context.Context, r *record, tick time.Time) (string, error) {
	id := TickJobID(r.Name, r.Gen, tick)
	if _, err := s.jobs.Get(ctx, id); err == nil {
		return id, nil
	} else if !errors.Is(err, ojs.ErrNotFound) {
		return "", err
	}
	// The overlap policy is evaluated before anything the enqueue itself
	// decides (ojs-extension-interactions.md 13, EI-011).
	if r.OverlapPolicy != ojs.CronOverlapAllow && r.LastJobID != "" {
		prev, err := s.jobs.Get(ctx, r.LastJobID)
		switch {
		case err == nil && !prev.State.Terminal():
			s.log.Info("cron tick skipped: previous run still unfinished", "cron", r.Name, "tick", tick, "previous", prev.ID, "state", prev.State)
			return "", nil
		case err != nil && !errors.Is(err, ojs.ErrNotFound):
			return "", err
		}
	}
	j, err := r.template()
	if err != nil {
		s.log.Error("cron job template no longer valid", "cron", r.Name, "error", err)
		return "", nil
	}
	j.ID = id
	if _, err := s.jobs.Enqueue(ctx, j); err != nil {
		var dup *ojs.DuplicateError
		switch {
		case errors.As(err, &dup) && dup.ExistingID == id && dup.UniqueKey == "":
			return id, nil // a racing handler of the same tick created it
		case errors.Is(err, ojs.ErrUnavailable) || ctx.Err() != nil:
			return "", err
		}
		// Refused for good (a full queue, a unique job conflict): the
		// tick is over, as a producer's refused enqueue would be.
		s.log.Warn("cron tick refused by enqueue", "cron", r.Name, "tick", tick, "error", err)
		return "", nil
	}
	return id, nil
}

// after is the tick that follows tick. Ticks missed while no process ran
// are coalesced: when several lie in the past, only the latest of them is
// next (and fires at once, late).
func (s *Scheduler) after(sched *Schedule, loc *time.Location, tick time.Time) time.Time {
	next := sched.Next(tick, loc)
	now := s.clock.Now()
	for range 1_000_000 {
		if next.IsZero() || next.After(now) {
			break
		}
		n := sched.Next(next, loc)
		if n.IsZero() || n.After(now) {
			break
		}
		next = n
	}
	return next
}

// schedule writes the message schedule of r's next tick on r's schedule
// subject, replacing the one there.
func (s *Scheduler) schedule(ctx context.Context, r *record) error {
	if r.NextRunAt == nil {
		return nil
	}
	m := nats.NewMsg(topology.CronTick(r.Name, r.Gen))
	m.Header.Set(jetstream.ScheduleHeader, "@at "+s.clock.At(r.NextRunAt.Time).UTC().Format(time.RFC3339Nano))
	m.Header.Set(jetstream.ScheduleTargetHeader, topology.CronFiredSubject)
	m.Header.Set(hdrName, r.Name)
	m.Header.Set(hdrGen, r.Gen)
	m.Header.Set(hdrTick, r.NextRunAt.UTC().Format(time.RFC3339Nano))
	if _, err := s.js.PublishMsg(ctx, m); err != nil {
		return fmt.Errorf("schedule cron job %s: %w", r.Name, jobstore.Unavailable(err))
	}
	return nil
}

// ensureSchedule writes r's schedule unless it is there already.
func (s *Scheduler) ensureSchedule(ctx context.Context, r *record) error {
	if r.NextRunAt == nil {
		return nil
	}
	m, err := s.ticks.GetLastMsgForSubject(ctx, topology.CronTick(r.Name, r.Gen))
	switch {
	case err == nil && m.Header.Get(hdrTick) == r.NextRunAt.UTC().Format(time.RFC3339Nano):
		return nil
	case err != nil && !errors.Is(err, jetstream.ErrMsgNotFound):
		return fmt.Errorf("read cron schedule of %s: %w", r.Name, jobstore.Unavailable(err))
	}
	return s.schedule(ctx, r)
}

// TickJobID is the id of the job that the tick at tick of registration
// gen of cron job name enqueues: a UUIDv7 whose time is the tick's and
// whose other bits are a hash of the three, so every process that handles
// the tick derives the same id.
func TickJobID(name, gen string, tick time.Time) string {
	h := sha256.Sum256([]byte(name + "\x00" + gen + "\x00" + tick.UTC().Format(time.RFC3339Nano)))
	var u uuid.UUID
	var ms [8]byte
	binary.BigEndian.PutUint64(ms[:], uint64(tick.UnixMilli()))
	copy(u[:6], ms[2:])
	copy(u[6:], h[:10])
	u[6] = u[6]&0x0f | 0x70 // version 7
	u[8] = u[8]&0x3f | 0x80 // RFC 9562 variant
	return u.String()
}

// schedule parses r's expression and zone.
func (r *record) schedule() (*Schedule, *time.Location, error) {
	sched, err := Parse(r.Cron)
	if err != nil {
		return nil, nil, err
	}
	loc, err := time.LoadLocation(r.Timezone)
	if err != nil {
		return nil, nil, err
	}
	return sched, loc, nil
}

// template is the job a tick enqueues: the definition's type, args, meta
// and options read as an enqueue request.
func (r *record) template() (*ojs.Job, error) {
	req := struct {
		Type    string          `json:"type"`
		Args    json.RawMessage `json:"args,omitempty"`
		Meta    json.RawMessage `json:"meta,omitempty"`
		Options json.RawMessage `json:"options,omitempty"`
	}{r.Type, r.Args, r.Meta, r.Options}
	b, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	return ojs.ParseJob(b)
}
