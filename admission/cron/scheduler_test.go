package cron_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"go.uber.org/goleak"

	"github.com/jetgate/jetgate/admission"
	"github.com/jetgate/jetgate/admission/cron"
	"github.com/jetgate/jetgate/admission/ojs"
	"github.com/jetgate/jetgate/jetstream/natstest"
	"github.com/jetgate/jetgate/jetstream/topology"
)

// Every goroutine a Scheduler starts stops with Stop (STYLE item 14).
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fastClock runs k times faster than real time from origin, so a cron job
// of "* * * * *" ticks every 60/k real seconds. Every process of a test
// shares one.
type fastClock struct {
	origin time.Time
	k      float64
}

func (c fastClock) Now() time.Time {
	return c.origin.Add(time.Duration(float64(time.Since(c.origin)) * c.k))
}

func (c fastClock) At(t time.Time) time.Time {
	return c.origin.Add(time.Duration(float64(t.Sub(c.origin)) / c.k))
}

// recorder notes which process enqueued which tick job.
type recorder struct {
	mu    sync.Mutex
	procs map[string][]int // job id -> processes whose enqueue created it
	order []string
}

func (r *recorder) add(proc int, id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.procs[id] == nil {
		r.order = append(r.order, id)
	}
	r.procs[id] = append(r.procs[id], proc)
}

// snapshot returns the job ids in order of creation.
func (r *recorder) snapshot() ([]string, map[string][]int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := make(map[string][]int, len(r.procs))
	for k, v := range r.procs {
		m[k] = append([]int(nil), v...)
	}
	return append([]string(nil), r.order...), m
}

// countingJobs is one process's admission service, recording every
// successful enqueue. failOnce, when set, makes the first successful
// enqueue report a transport failure, as a process that stops right
// after the enqueue and before advancing the definition would.
type countingJobs struct {
	*admission.Service
	proc     int
	rec      *recorder
	failOnce *sync.Once
}

func (c countingJobs) Enqueue(ctx context.Context, j *ojs.Job) (*ojs.Job, error) {
	nj, err := c.Service.Enqueue(ctx, j)
	if err != nil {
		return nil, err
	}
	c.rec.add(c.proc, nj.ID)
	if c.failOnce != nil {
		var fail bool
		c.failOnce.Do(func() { fail = true })
		if fail {
			return nil, fmt.Errorf("%w: connection lost after enqueue", ojs.ErrUnavailable)
		}
	}
	return nj, nil
}

type proc struct {
	svc   *admission.Service
	sched *cron.Scheduler
}

func (p proc) stop() {
	p.sched.Stop()
	p.svc.Stop()
}

type env struct {
	t     *testing.T
	ns    *server.Server
	clock fastClock
	rec   *recorder
	// events, when set, receives every process's cron events.
	events cron.Events
}

func newEnv(t *testing.T, k float64) *env {
	s := natstest.RunServer(t)
	return &env{t: t, ns: s, clock: fastClock{origin: time.Now(), k: k}, rec: &recorder{procs: map[string][]int{}}}
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// start runs one jetgate process's admission service and cron scheduler
// on its own NATS connection.
func (e *env) start(n int, failOnce *sync.Once) proc {
	t := e.t
	t.Helper()
	ctx := testCtx(t)
	_, js := natstest.Connect(t, e.ns)
	assets, err := topology.Ensure(ctx, js, topology.Config{})
	if err != nil {
		t.Fatal(err)
	}
	svc, err := admission.New(js.Conn(), js, assets, admission.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.Start(ctx); err != nil {
		t.Fatal(err)
	}
	sched, err := cron.New(countingJobs{svc, n, e.rec, failOnce}, js, assets, cron.Config{Clock: e.clock, AckWait: 2 * time.Second, Events: e.events})
	if err != nil {
		t.Fatal(err)
	}
	if err := sched.Start(ctx); err != nil {
		t.Fatal(err)
	}
	p := proc{svc, sched}
	t.Cleanup(p.stop)
	return p
}

// tickOf reads the tick time (milliseconds) a tick job id carries.
func tickOf(t *testing.T, id string) time.Time {
	ms, err := strconv.ParseInt(strings.ReplaceAll(id[:13], "-", ""), 16, 64)
	if err != nil {
		t.Fatal(err)
	}
	return time.UnixMilli(ms).UTC()
}

// waitJobs polls until the recorder holds at least n jobs.
func (e *env) waitJobs(n int, within time.Duration) []string {
	e.t.Helper()
	deadline := time.Now().Add(within)
	for {
		ids, _ := e.rec.snapshot()
		if len(ids) >= n {
			return ids
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("%d tick jobs after %s, want %d", len(ids), within, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// assertOnce checks that every tick job was created by exactly one
// enqueue, that ticks strictly increase, and that each lies on a minute
// of the schedule "* * * * *".
func (e *env) assertOnce(ids []string) {
	e.t.Helper()
	_, procs := e.rec.snapshot()
	var last time.Time
	for _, id := range ids {
		if len(procs[id]) != 1 {
			e.t.Fatalf("tick job %s enqueued by processes %v, want exactly one", id, procs[id])
		}
		tick := tickOf(e.t, id)
		if !tick.After(last) {
			e.t.Fatalf("tick %s does not follow %s", tick, last)
		}
		if tick.Second() != 0 || tick.Nanosecond() != 0 {
			e.t.Fatalf("tick %s is not on a minute", tick)
		}
		last = tick
	}
}

func register(t *testing.T, p proc, cj ojs.CronJob) *ojs.CronJob {
	t.Helper()
	out, err := p.sched.CronRegister(testCtx(t), cj)
	if err != nil {
		t.Fatalf("register %s: %v", cj.Name, err)
	}
	return out
}

func everyMinute(name, queue string) ojs.CronJob {
	return ojs.CronJob{Name: name, Cron: "* * * * *", Type: "report.generate", Args: []byte(`["x"]`),
		Options: []byte(`{"queue":"` + queue + `"}`), OverlapPolicy: ojs.CronOverlapAllow}
}

// Issue 18: with three jetgate processes on one server, each tick of a
// cron job enqueues its job exactly once (one minute of the fast clock is
// one real second here).
func TestEachTickOnceAcrossThreeProcesses(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 60)
	ps := []proc{e.start(0, nil), e.start(1, nil), e.start(2, nil)}
	register(t, ps[0], everyMinute("three", "cron3"))
	ids := e.waitJobs(8, 60*time.Second)
	e.assertOnce(ids)
	for _, id := range ids {
		j, err := ps[2].svc.Get(testCtx(t), id)
		if err != nil || j.Type != "report.generate" || j.Queue != "cron3" {
			t.Fatalf("tick job %s: %+v, %v", id, j, err)
		}
	}
	cj, err := ps[1].sched.CronJob(testCtx(t), "three")
	if err != nil {
		t.Fatal(err)
	}
	if cj.LastRunAt == nil || cj.NextRunAt == nil || !cj.NextRunAt.After(cj.LastRunAt.Time) {
		t.Fatalf("definition after ticks: last_run_at %v next_run_at %v", cj.LastRunAt, cj.NextRunAt)
	}
}

// Issue 18: stopping the process that fired a tick does not stop the cron
// job: the next ticks are fired by the others, each once.
func TestStoppedProcessTicksFiredByOthers(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 60)
	ps := []proc{e.start(0, nil), e.start(1, nil), e.start(2, nil)}
	register(t, ps[0], everyMinute("survivor", "cronstop"))
	ids := e.waitJobs(1, 30*time.Second)
	_, procs := e.rec.snapshot()
	firer := procs[ids[0]][0]
	ps[firer].stop() // returns once the process handles no tick any more
	before, _ := e.rec.snapshot()
	ids = e.waitJobs(len(before)+3, 60*time.Second)
	e.assertOnce(ids)
	_, procs = e.rec.snapshot()
	for _, id := range ids[len(before):] {
		if procs[id][0] == firer {
			t.Fatalf("stopped process %d fired tick %s", firer, tickOf(t, id))
		}
	}
}

// Issue 18: a tick that fires while no jetgate process runs is not lost:
// the next process to start runs it, late, once; ticks missed after it
// are coalesced into one.
func TestTickMissedWhileNoProcessRuns(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 30) // a minute is two seconds
	a := e.start(0, nil)
	cj := register(t, a, everyMinute("late", "cronlate"))
	a.stop()
	first := cj.NextRunAt.Time
	// Wait on the clock until the first tick and the one after it passed.
	for !e.clock.Now().After(first.Add(90 * time.Second)) {
		time.Sleep(20 * time.Millisecond)
	}
	if ids, _ := e.rec.snapshot(); len(ids) != 0 {
		t.Fatalf("jobs %v enqueued while no process ran", ids)
	}
	e.start(1, nil)
	ids := e.waitJobs(3, 60*time.Second)
	e.assertOnce(ids)
	if got := tickOf(t, ids[0]); !got.Equal(first.UTC()) {
		t.Fatalf("first job is of tick %s, want the missed tick %s", got, first.UTC())
	}
}

// Crash point "after the enqueue, before the definition advances": the
// fired tick is handled again and finds its job by id, so the job is not
// enqueued twice and the cron job goes on.
func TestTickRetriedAfterEnqueueEnqueuesOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 60)
	var once sync.Once
	p := e.start(0, &once)
	register(t, p, everyMinute("retried", "cronretry"))
	ids := e.waitJobs(3, 60*time.Second)
	e.assertOnce(ids)
	fired := false
	once.Do(func() { fired = true })
	if fired {
		t.Fatal("the simulated failure never happened")
	}
}

// L2-CRON-003: by default a tick is skipped while the job of the previous
// tick has not finished; with overlap_policy "allow" every tick enqueues.
func TestOverlapSkipByDefault(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 60)
	p := e.start(0, nil)
	skip := everyMinute("skipper", "cronskip")
	skip.OverlapPolicy = ""
	out := register(t, p, skip)
	if out.OverlapPolicy != ojs.CronOverlapSkip {
		t.Fatalf("default overlap policy %q, want skip", out.OverlapPolicy)
	}
	register(t, p, everyMinute("allower", "cronallow"))
	ctx := testCtx(t)
	// While nothing runs the jobs, allower enqueues on every tick and
	// skipper only on its first.
	deadline := time.Now().Add(60 * time.Second)
	var skipJobs, allowJobs []string
	for {
		ids, _ := e.rec.snapshot()
		skipJobs, allowJobs = nil, nil
		for _, id := range ids {
			j, err := p.svc.Get(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if j.Queue == "cronskip" {
				skipJobs = append(skipJobs, id)
			} else {
				allowJobs = append(allowJobs, id)
			}
		}
		if len(allowJobs) >= 4 && len(skipJobs) >= 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("allow jobs %d, skip jobs %d", len(allowJobs), len(skipJobs))
		}
		time.Sleep(20 * time.Millisecond)
	}
	def, err := p.sched.CronJob(ctx, "skipper")
	if err != nil {
		t.Fatal(err)
	}
	if len(skipJobs) != 1 || def.LastJobID != skipJobs[0] {
		t.Fatalf("skip policy enqueued %v (last_job_id %s) while the first job waited", skipJobs, def.LastJobID)
	}
	if !def.NextRunAt.After(tickOf(t, skipJobs[0]).Add(2 * time.Minute)) {
		t.Fatalf("skipped ticks did not advance next_run_at: %s", def.NextRunAt)
	}
	// Once the previous job is finished (cancelled here), ticks run again.
	if _, _, err := p.svc.Cancel(ctx, skipJobs[0]); err != nil {
		t.Fatal(err)
	}
	for {
		def, err = p.sched.CronJob(ctx, "skipper")
		if err != nil {
			t.Fatal(err)
		}
		if def.LastJobID != skipJobs[0] {
			break
		}
		if time.Now().After(deadline.Add(30 * time.Second)) {
			t.Fatal("skip policy never ran again after the previous job finished")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Registration and removal (13.2, 13.3): a name registered twice is a
// conflict; a deleted cron job enqueues nothing more, and its name can be
// registered again.
func TestRegisterDuplicateAndDelete(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 60)
	p := e.start(0, nil)
	ctx := testCtx(t)
	cj := everyMinute("dup", "crondup")
	register(t, p, cj)
	if _, err := p.sched.CronRegister(ctx, cj); !errors.Is(err, ojs.ErrDuplicate) {
		t.Fatalf("second register: %v, want a duplicate", err)
	}
	e.waitJobs(1, 30*time.Second)
	if err := p.sched.CronDelete(ctx, "dup"); err != nil {
		t.Fatal(err)
	}
	if _, err := p.sched.CronJob(ctx, "dup"); !errors.Is(err, ojs.ErrNotFound) {
		t.Fatalf("get after delete: %v", err)
	}
	if err := p.sched.CronDelete(ctx, "dup"); !errors.Is(err, ojs.ErrNotFound) {
		t.Fatalf("second delete: %v", err)
	}
	settled, _ := e.rec.snapshot()
	// Three more ticks of the fast clock pass without a job.
	until := e.clock.Now().Add(3 * time.Minute)
	for e.clock.Now().Before(until) {
		time.Sleep(20 * time.Millisecond)
	}
	if ids, _ := e.rec.snapshot(); len(ids) > len(settled)+1 {
		// One tick may have been in flight when the delete landed.
		t.Fatalf("deleted cron job kept enqueuing: %d jobs, %d at delete", len(ids), len(settled))
	}
	register(t, p, cj)
	page, err := p.sched.CronJobs(ctx, ojs.PageRequest{Limit: 10})
	if err != nil || len(page.CronJobs) != 1 || page.CronJobs[0].Name != "dup" || page.Pagination.Total != 1 {
		t.Fatalf("list: %+v, %v", page, err)
	}
}

// 400s name the field: the expression, the time zone, the overlap policy,
// the name and the job template.
func TestRegisterValidation(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 1)
	p := e.start(0, nil)
	ctx := testCtx(t)
	base := everyMinute("valid", "q")
	cases := []struct {
		field  string
		modify func(*ojs.CronJob)
	}{
		{"cron", func(c *ojs.CronJob) { c.Cron = "61 * * * *" }},
		{"cron", func(c *ojs.CronJob) { c.Cron = "" }},
		{"cron", func(c *ojs.CronJob) { c.Cron = "@fortnightly" }},
		{"cron", func(c *ojs.CronJob) { c.Cron = "0 0 30 2 *" }},
		{"timezone", func(c *ojs.CronJob) { c.Timezone = "Mars/Olympus_Mons" }},
		{"timezone", func(c *ojs.CronJob) { c.Timezone = "Local" }},
		{"overlap_policy", func(c *ojs.CronJob) { c.OverlapPolicy = "sometimes" }},
		{"name", func(c *ojs.CronJob) { c.Name = "" }},
		{"name", func(c *ojs.CronJob) { c.Name = "a b" }},
		{"type", func(c *ojs.CronJob) { c.Type = "" }},
	}
	for _, c := range cases {
		cj := base
		c.modify(&cj)
		_, err := p.sched.CronRegister(ctx, cj)
		var ve *ojs.ValidationError
		if !errors.As(err, &ve) || ve.Field != c.field {
			t.Errorf("%+v: error %v, want a validation error on %q", cj, err, c.field)
		}
	}
	ny := base
	ny.Timezone, ny.Cron = "America/New_York", "0 9 * * *"
	out := register(t, p, ny)
	loc, _ := time.LoadLocation("America/New_York")
	if w := out.NextRunAt.In(loc); w.Hour() != 9 || w.Minute() != 0 {
		t.Fatalf("next_run_at %s is not 09:00 in New York", w)
	}
}

// Crash point "after the definition advanced, before the next tick is
// scheduled": the fired tick is handled again, sees the tick done, writes
// the missing schedule, and the cron job goes on, each tick once.
func TestTickRetriedAfterAdvanceSchedulesNext(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 60)
	p := e.start(0, nil)
	var once sync.Once
	cron.SetAfterAdvance(p.sched, func() error {
		var fail bool
		once.Do(func() { fail = true })
		if fail {
			return fmt.Errorf("%w: stopped after advancing", ojs.ErrUnavailable)
		}
		return nil
	})
	register(t, p, everyMinute("advanced", "cronadv"))
	ids := e.waitJobs(3, 60*time.Second)
	e.assertOnce(ids)
	fired := false
	once.Do(func() { fired = true })
	if fired {
		t.Fatal("the simulated stop never happened")
	}
}
