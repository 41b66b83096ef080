package cron

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/jetgate/jetgate/admission/ojs"
	"github.com/jetgate/jetgate/jetstream/jobstore"
	"github.com/jetgate/jetgate/jetstream/topology"
)

// nameRule is the rule a cron job name follows: it is a path segment of
// /ojs/v1/cron/{name} and a KV key.
const nameRule = "a name of 1 to 255 characters from [A-Za-z0-9._:-], starting with a letter or digit"

func validName(n string) bool {
	if n == "" || len(n) > 255 {
		return false
	}
	for i := 0; i < len(n); i++ {
		c := n[i]
		alnum := 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
		if !alnum && (i == 0 || !strings.ContainsRune("._:-", rune(c))) {
			return false
		}
	}
	return true
}

// validate checks a definition and fills its defaults (timezone UTC,
// overlap policy skip). Errors are *ojs.ValidationError naming the field.
func validate(cj *ojs.CronJob, now time.Time) (*Schedule, time.Time, error) {
	if !validName(cj.Name) {
		return nil, time.Time{}, &ojs.ValidationError{Field: "name", Rule: nameRule, Received: quote(cj.Name)}
	}
	// The expression is named by the field the client sent it in: cron
	// (the binding) or expression (openapi.yaml).
	field := cmp.Or(cj.CronField, "cron")
	if strings.TrimSpace(cj.Cron) == "" {
		return nil, time.Time{}, &ojs.ValidationError{Field: field, Rule: "a 5-field cron expression or a shorthand such as @daily (required)"}
	}
	sched, err := Parse(cj.Cron)
	if err != nil {
		return nil, time.Time{}, &ojs.ValidationError{Field: field, Rule: "a 5-field cron expression or a shorthand such as @daily",
			Received: quote(cj.Cron), Message: fmt.Sprintf("field '%s' is not a valid cron expression: %v", field, err)}
	}
	if cj.Timezone == "" {
		cj.Timezone = "UTC"
	}
	loc, err := time.LoadLocation(cj.Timezone)
	if err != nil || cj.Timezone == "Local" {
		return nil, time.Time{}, &ojs.ValidationError{Field: "timezone", Rule: "an IANA time zone name such as America/New_York or UTC", Received: quote(cj.Timezone)}
	}
	// The policy is kept as the client sent it (a client reads back what
	// it wrote); ojs.CronOverlapMode gives its behaviour.
	if ojs.CronOverlapMode(cj.OverlapPolicy) == "" {
		return nil, time.Time{}, &ojs.ValidationError{Field: "overlap_policy",
			Rule: "one of skip (the default), allow (alias queue), cancel (alias replace)", Received: quote(cj.OverlapPolicy)}
	}
	cj.OverlapPolicy = cmp.Or(cj.OverlapPolicy, ojs.CronOverlapSkip)
	r := record{CronJob: *cj}
	if _, err := r.template(); err != nil {
		return nil, time.Time{}, err
	}
	next := sched.Next(now, loc)
	if next.IsZero() {
		return nil, time.Time{}, &ojs.ValidationError{Field: field, Rule: "an expression that matches a time within the next 30 years", Received: quote(cj.Cron)}
	}
	return sched, next, nil
}

func quote(s string) string {
	if len(s) > 64 {
		s = s[:64] + "..."
	}
	return fmt.Sprintf("%q", s)
}

// CronRegister registers a cron job (13.2). A name that is registered
// already answers 409: to change a cron job, delete it and register it
// again. The first tick is the first one after now.
//
// The tick's schedule is written before the definition is created: a
// process that stops between the two leaves a schedule that fires,
// finds no definition of its generation and is dropped; the other order
// could leave a definition that never fires.
func (s *Scheduler) CronRegister(ctx context.Context, cj ojs.CronJob) (*ojs.CronJob, error) {
	cj.CreatedAt = ojs.NewTime(s.clock.Now())
	cj.LastRunAt, cj.LastJobID, cj.CancelJobID = nil, "", ""
	return s.store(ctx, cj, func(b []byte) error {
		_, err := s.kv.Create(ctx, topology.Token(cj.Name), b)
		switch {
		case errors.Is(err, jetstream.ErrKeyExists):
			return fmt.Errorf("cron job '%s' already exists: %w", cj.Name, ojs.ErrDuplicate)
		case err != nil:
			return fmt.Errorf("register cron job %s: %w", cj.Name, jobstore.Unavailable(err))
		}
		return nil
	})
}

// store validates cj as a new registration (generation), schedules its
// first tick and then writes the definition with write (a create, or a
// compare-and-swap over the registration it replaces); a write that
// fails takes the schedule back. The schedule comes first: see
// CronRegister.
func (s *Scheduler) store(ctx context.Context, cj ojs.CronJob, write func([]byte) error) (*ojs.CronJob, error) {
	_, next, err := validate(&cj, s.clock.Now())
	if err != nil {
		return nil, err
	}
	r := newRecord(cj, next)
	b, err := json.Marshal(r)
	if err != nil {
		return nil, err
	}
	if err := s.checkSize(r, b); err != nil {
		return nil, err
	}
	if err := s.schedule(ctx, r); err != nil {
		return nil, err
	}
	if err := write(b); err != nil {
		s.unschedule(r)
		return nil, err
	}
	out := r.CronJob
	return &out, nil
}

// newRecord is a new registration (generation) of cj, whose next tick is
// next unless it is disabled.
func newRecord(cj ojs.CronJob, next time.Time) *record {
	cj.Status, cj.NextRunAt = statusActive, ojs.NewTime(next)
	if !cj.IsEnabled() {
		cj.Status, cj.NextRunAt = statusDisabled, nil
	}
	return &record{CronJob: cj, Gen: nuid.Next()}
}

// checkSize refuses, before anything is written (issue 31), a definition
// whose record (b) would not fit the NATS server's max_payload, or whose
// job could never be enqueued: its template over the job limit of the
// record budget (ojs.PayloadLimits), with room for the fields the server
// adds at enqueue.
func (s *Scheduler) checkSize(r *record, b []byte) error {
	const headroom = 1 << 10 // headers; the server's fields of a new job
	limits, err := ojs.NewPayloadLimits(s.js.Conn().MaxPayload())
	if err != nil {
		return err
	}
	if size := int64(len(b)); size > limits.MaxPayload-headroom {
		return &ojs.TooLargeError{What: "cron job as stored", Limit: limits.MaxPayload - headroom, Size: size,
			Hint: "Send a smaller cron job: pass large data to its jobs by reference."}
	}
	tpl, err := r.template()
	if err != nil {
		return err
	}
	limits.Job, limits.Reserve = limits.Job-headroom, limits.Reserve+headroom
	return limits.CheckJob(tpl, "")
}

// unschedule removes the schedule of a registration that does not exist
// (any more). A schedule left behind fires once and is dropped.
func (s *Scheduler) unschedule(r *record) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.ticks.Purge(ctx, jetstream.WithPurgeSubject(topology.CronTick(r.Name, r.Gen))); err != nil {
		s.log.Debug("cron schedule not removed; it will fire once and be dropped", "cron", r.Name, "error", err)
	}
}

// CronJob returns one cron job (the binding lists GET /ojs/v1/cron/{name}
// nowhere but in the list; jetgate serves it too).
func (s *Scheduler) CronJob(ctx context.Context, name string) (*ojs.CronJob, error) {
	if !validName(name) {
		return nil, fmt.Errorf("cron job '%s': %w", name, ojs.ErrNotFound)
	}
	r, _, err := s.load(ctx, name)
	if err != nil {
		return nil, err
	}
	return &r.CronJob, nil
}

// CronJobs lists the cron jobs by name (13.1), one page.
func (s *Scheduler) CronJobs(ctx context.Context, page ojs.PageRequest) (*ojs.CronPage, error) {
	keys, err := s.kv.ListKeys(ctx)
	if err != nil {
		return nil, fmt.Errorf("list cron jobs: %w", jobstore.Unavailable(err))
	}
	var names []string
	for k := range keys.Keys() {
		names = append(names, k)
	}
	_ = keys.Stop()
	slices.Sort(names)
	out := &ojs.CronPage{CronJobs: []ojs.CronJob{}, Pagination: ojs.Pagination{Total: len(names), Limit: page.Limit, Offset: page.Offset}}
	lo := min(page.Offset, len(names))
	hi := min(lo+page.Limit, len(names))
	for _, k := range names[lo:hi] {
		e, err := s.kv.Get(ctx, k)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue // deleted meanwhile
		}
		if err != nil {
			return nil, fmt.Errorf("read cron job: %w", jobstore.Unavailable(err))
		}
		var r record
		if err := json.Unmarshal(e.Value(), &r); err != nil {
			return nil, fmt.Errorf("decode cron job %s: %w", k, err)
		}
		out.CronJobs = append(out.CronJobs, r.CronJob)
	}
	out.Pagination.HasMore = hi < len(names)
	return out, nil
}

// CronDelete unregisters a cron job (13.3). Jobs its ticks enqueued are
// not touched; a tick that fires after the delete finds no definition and
// enqueues nothing.
func (s *Scheduler) CronDelete(ctx context.Context, name string) error {
	if !validName(name) {
		return fmt.Errorf("cron job '%s': %w", name, ojs.ErrNotFound)
	}
	for range 5 {
		r, rev, err := s.load(ctx, name)
		if err != nil {
			return err
		}
		err = s.kv.Delete(ctx, topology.Token(name), jetstream.LastRevision(rev))
		if err == nil {
			s.unschedule(r)
			return nil
		}
		if !casLost(err) {
			return fmt.Errorf("delete cron job %s: %w", name, jobstore.Unavailable(err))
		}
	}
	return fmt.Errorf("delete cron job %s: %w", name, ojs.ErrConflict)
}

// casLost reports a compare-and-swap refused because the entry changed
// (single replicas and replicated buckets report it differently).
func casLost(err error) bool {
	return errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyRevisionMismatch)
}

// CronPut registers or replaces cron job name (PUT /ojs/v1/crons/{name},
// issue 32). build makes the definition from the one registered (nil when
// there is none): a PUT body's fields over the current ones. It reports
// whether the definition was created.
//
// A replacement is a new registration (generation) of the name, written
// with one compare-and-swap on the revision build was given: ticks of the
// old one are dropped, and its schedule removed. The replacement keeps the
// creation time and the last run (so that overlap_policy skip still waits
// for the job of the last tick that ran). Its next tick is the first one
// after now; a disabled definition has none.
func (s *Scheduler) CronPut(ctx context.Context, name string, build func(cur *ojs.CronJob) (ojs.CronJob, error)) (*ojs.CronJob, bool, error) {
	if !validName(name) {
		return nil, false, &ojs.ValidationError{Field: "name", Rule: nameRule, Received: quote(name)}
	}
	for range 5 {
		old, rev, err := s.load(ctx, name)
		if err != nil && !errors.Is(err, ojs.ErrNotFound) {
			return nil, false, err
		}
		var cur *ojs.CronJob
		if old != nil {
			c := old.CronJob
			cur = &c
		}
		cj, err := build(cur)
		if err != nil {
			return nil, false, err
		}
		if cj.Name != name {
			return nil, false, &ojs.ValidationError{Field: "name", Rule: "the cron job name of the path (" + name + ") when given", Received: quote(cj.Name)}
		}
		if old == nil {
			out, err := s.CronRegister(ctx, cj)
			if errors.Is(err, ojs.ErrDuplicate) {
				continue // registered meanwhile: replace that one
			}
			return out, err == nil, err
		}
		out, err := s.replace(ctx, old, rev, cj)
		if errors.Is(err, errLost) {
			continue
		}
		return out, false, err
	}
	return nil, false, fmt.Errorf("put cron job %s: %w", name, ojs.ErrConflict)
}

var errLost = errors.New("cron job changed meanwhile")

// replace writes cj as a new registration over old (at revision rev): the
// new schedule first, then the definition (compare-and-swap), then the old
// schedule is removed. errLost: old changed meanwhile.
func (s *Scheduler) replace(ctx context.Context, old *record, rev uint64, cj ojs.CronJob) (*ojs.CronJob, error) {
	cj.CreatedAt = old.CreatedAt
	cj.LastRunAt, cj.LastJobID, cj.CancelJobID = old.LastRunAt, old.LastJobID, ""
	out, err := s.store(ctx, cj, func(b []byte) error {
		_, err := s.kv.Update(ctx, topology.Token(cj.Name), b, rev)
		switch {
		case casLost(err) || errors.Is(err, jetstream.ErrKeyNotFound):
			return errLost
		case err != nil:
			return fmt.Errorf("replace cron job %s: %w", cj.Name, jobstore.Unavailable(err))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	s.unschedule(old)
	return out, nil
}
