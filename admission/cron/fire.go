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

// fire runs the tick at time tick of registration gen of cron job name.
// The tick is decided (run it or skip it, by the overlap policy) and the
// definition advanced to its next tick by one compare-and-swap, which
// records the tick's job as the last run when it runs: of any number of
// handlers of the tick, one decision lands. Only then is its job enqueued
// (after cancelling the job it replaces, policy cancel), and only after
// that is the next tick scheduled, so a tick never fires before the job
// of the tick before it exists. Every step is safe to repeat; see the
// package doc.
func (s *Scheduler) fire(ctx context.Context, name, gen string, tick time.Time) error {
	for range 5 {
		r, rev, err := s.load(ctx, name)
		if errors.Is(err, ojs.ErrNotFound) {
			return nil // deleted: its ticks are dropped
		}
		if err != nil {
			return err
		}
		if r.Gen != gen {
			return nil // a tick of an earlier registration of the name
		}
		if r.NextRunAt == nil || !r.NextRunAt.Equal(tick) {
			// The tick was decided already (a disabled definition has no
			// next tick). Its handler may have stopped before enqueueing
			// the job it recorded, or before writing the next schedule.
			if r.LastJobID == TickJobID(name, gen, tick) {
				if err := s.start(ctx, r, tick); err != nil {
					return err
				}
			}
			return s.ensureSchedule(ctx, r)
		}
		sched, loc, err := r.schedule()
		if err != nil {
			return nil // cannot happen: validated at registration
		}
		run, replaced, blocking, err := s.decide(ctx, r, tick)
		if err != nil {
			return err
		}
		nr := *r
		nr.CancelJobID = ""
		if run {
			nr.LastRunAt, nr.LastJobID, nr.CancelJobID = ojs.NewTime(tick), TickJobID(name, gen, tick), replaced
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
				continue // decided, deleted or replaced meanwhile: look again
			}
			return fmt.Errorf("advance cron job %s: %w", name, jobstore.Unavailable(err))
		}
		if s.afterAdvance != nil {
			if err := s.afterAdvance(); err != nil {
				return err // a test stopping the handler here
			}
		}
		if run {
			if err := s.start(ctx, &nr, tick); err != nil {
				return err
			}
		} else {
			s.skipped(r, tick, reasonOverlap, blocking, nil)
		}
		return s.schedule(ctx, &nr)
	}
	return errBusy
}

// decide applies r's overlap policy to the tick (evaluated before
// anything the enqueue itself decides, ojs-extension-interactions.md 13,
// EI-011): whether the tick runs, and the unfinished job of the last run
// it replaces (policy cancel), or the unfinished job that makes it skip
// (policy skip). The last run's job was enqueued before this tick was
// scheduled (fire), so a job that cannot be found has ended and been
// removed (retention), or was refused at its enqueue.
func (s *Scheduler) decide(ctx context.Context, r *record, tick time.Time) (run bool, replaced, blocking string, err error) {
	mode := ojs.CronOverlapMode(r.OverlapPolicy)
	if mode == ojs.CronOverlapAllow || r.LastJobID == "" {
		return true, "", "", nil
	}
	prev, err := s.jobs.Get(ctx, r.LastJobID)
	switch {
	case errors.Is(err, ojs.ErrNotFound):
		return true, "", "", nil
	case err != nil:
		return false, "", "", err
	case prev.State.Terminal():
		return true, "", "", nil
	case mode == ojs.CronOverlapCancel:
		s.log.Info("cron tick replaces the unfinished previous run", "cron", r.Name, "tick", tick, "previous", prev.ID, "state", prev.State)
		return true, prev.ID, "", nil
	}
	s.log.Info("cron tick skipped: previous run still unfinished", "cron", r.Name, "tick", tick, "previous", prev.ID, "state", prev.State)
	return false, "", prev.ID, nil
}

// start carries out a tick that r records as run: it cancels the job the
// tick replaces, if any, then enqueues the tick's job (r.LastJobID). Both
// are idempotent: a job that has ended is not cancelled, and the job is
// created expecting no record under its id, so a repeated start (a
// redelivered tick, a racing handler) finds the first one's job. An
// enqueue refused for good (a full queue, a unique conflict) ends the
// tick, as a producer's refused enqueue would. The start that creates the
// job publishes cron.triggered; a refused enqueue, cron.skipped.
func (s *Scheduler) start(ctx context.Context, r *record, tick time.Time) error {
	if r.CancelJobID != "" {
		_, _, err := s.jobs.Cancel(ctx, r.CancelJobID)
		switch {
		case err == nil, errors.Is(err, ojs.ErrNotFound), errors.Is(err, ojs.ErrInvalidState):
		default:
			return err
		}
	}
	if _, err := s.jobs.Get(ctx, r.LastJobID); err == nil {
		return nil
	} else if !errors.Is(err, ojs.ErrNotFound) {
		return err
	}
	j, err := r.template()
	if err != nil {
		s.log.Error("cron job template no longer valid", "cron", r.Name, "error", err)
		s.skipped(r, tick, reasonRefused, "", err)
		return nil
	}
	j.ID = r.LastJobID
	if _, err := s.jobs.Enqueue(ctx, j); err != nil {
		var dup *ojs.DuplicateError
		switch {
		case errors.As(err, &dup) && dup.ExistingID == j.ID && dup.UniqueKey == "":
			return nil // a racing handler of the same tick created it
		case errors.Is(err, ojs.ErrUnavailable) || ctx.Err() != nil:
			return err
		}
		s.log.Warn("cron tick refused by enqueue", "cron", r.Name, "job", j.ID, "error", err)
		existing := ""
		if errors.As(err, &dup) {
			existing = dup.ExistingID
		}
		s.skipped(r, tick, reasonRefused, existing, err)
		return nil
	}
	s.publish(EventTriggered, r, map[string]any{"job_id": j.ID, "scheduled_at": ojs.NewTime(tick)})
	return nil
}

// Reasons of cron.skipped (ojs-events.md 4.5).
const (
	// reasonOverlap: overlap policy skip, the last run's job unfinished.
	reasonOverlap = "overlap_prevention"
	// reasonRefused: the tick's enqueue was refused for good (a full
	// queue, a unique conflict, a template no longer valid).
	reasonRefused = "enqueue_refused"
)

// skipped publishes cron.skipped for the tick of r that enqueued nothing:
// existing is the job that caused it (the unfinished last run, or the
// duplicate a unique key found), cause the enqueue's refusal.
func (s *Scheduler) skipped(r *record, tick time.Time, reason, existing string, cause error) {
	data := map[string]any{"reason": reason, "scheduled_at": ojs.NewTime(tick)}
	if existing != "" {
		data["existing_job_id"] = existing
	}
	if cause != nil {
		data["error"] = cause.Error()
	}
	s.publish(EventSkipped, r, data)
}

// publish sends a cron event about r (ojs-events.md 4.5: cron_name,
// cron_expr and job_type in every one), its subject the cron job's name.
func (s *Scheduler) publish(typ string, r *record, data map[string]any) {
	if s.cfg.Events == nil {
		return
	}
	data["cron_name"], data["cron_expr"], data["job_type"] = r.Name, r.Cron, r.Type
	s.cfg.Events.Publish(typ, r.Name, data)
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
