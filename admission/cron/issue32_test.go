package cron_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jetgate/jetgate/admission/cron"
	"github.com/jetgate/jetgate/admission/ojs"
)

// Issue 32 cron, overlap_policy skip across processes: three processes
// handle the ticks of one cron job whose jobs nobody runs, and the one
// that decides the first tick stops right after its decision landed,
// before enqueueing (the crash point between the definition's
// compare-and-swap and the enqueue). The redelivered tick enqueues the
// recorded job, and while it is unfinished no later tick enqueues
// anything, whichever process handles it: exactly one job over many ticks.
func TestIssue32OverlapSkipAcrossProcessesAndAStop(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 60)
	var once sync.Once
	stopped := make(chan struct{})
	var procs []proc
	for i := range 3 {
		p := e.start(i, nil)
		cron.SetAfterAdvance(p.sched, func() error {
			var stop bool
			once.Do(func() { stop = true })
			if stop {
				close(stopped)
				return fmt.Errorf("%w: stopped after deciding the tick", ojs.ErrUnavailable)
			}
			return nil
		})
		procs = append(procs, p)
	}
	cj := everyMinute("skip-3", "cronskip3")
	cj.OverlapPolicy = ojs.CronOverlapSkip
	register(t, procs[0], cj)
	select {
	case <-stopped:
	case <-time.After(60 * time.Second):
		t.Fatal("no tick was decided")
	}
	ids := e.waitJobs(1, 60*time.Second)
	ctx := testCtx(t)
	// Let at least five more ticks pass (one a second here): each must
	// be skipped.
	first, err := procs[0].sched.CronJob(ctx, "skip-3")
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		def, err := procs[1].sched.CronJob(ctx, "skip-3")
		if err != nil {
			t.Fatal(err)
		}
		if def.NextRunAt.Sub(first.NextRunAt.Time) >= 5*time.Minute {
			if def.LastJobID != ids[0] {
				t.Fatalf("last_job_id %s, want the first tick's job %s", def.LastJobID, ids[0])
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("ticks did not advance: next_run_at %s", def.NextRunAt)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if ids, _ := e.rec.snapshot(); len(ids) != 1 {
		t.Fatalf("skip policy enqueued %d jobs while the first was unfinished: %v", len(ids), ids)
	}
	e.assertOnce(ids)
	if j, err := procs[2].svc.Get(ctx, ids[0]); err != nil || j.State != ojs.StateAvailable {
		t.Fatalf("the first tick's job: %v %v, want it available", j, err)
	}
}

// Issue 32 cron, overlap_policy cancel (alias replace, openapi.yaml and
// ojs-extension-interactions.md 13): a tick whose previous run is
// unfinished cancels it and enqueues its own job; the definition answers
// the policy as it was sent.
func TestIssue32OverlapReplaceCancelsThePreviousRun(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 60)
	p := e.start(0, nil)
	cj := everyMinute("replacer", "cronreplace")
	cj.OverlapPolicy = ojs.CronOverlapReplace
	if out := register(t, p, cj); out.OverlapPolicy != ojs.CronOverlapReplace {
		t.Fatalf("overlap_policy %q, want it as sent (replace)", out.OverlapPolicy)
	}
	ids := e.waitJobs(4, 60*time.Second)
	e.assertOnce(ids)
	ctx := testCtx(t)
	// Every job but the newest was cancelled by the tick after it (the
	// last ones may be between the two steps: poll).
	deadline := time.Now().Add(30 * time.Second)
	for {
		ids, _ = e.rec.snapshot()
		cancelled := 0
		for _, id := range ids[:len(ids)-1] {
			j, err := p.svc.Get(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if j.State == ojs.StateCancelled {
				cancelled++
			}
		}
		if cancelled >= 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d earlier runs cancelled, want each cancelled by the next tick", cancelled, len(ids)-1)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Issue 32 cron, PUT: a definition PUT disabled has no next tick and
// enqueues nothing; PUT enabled again, it ticks again, and the skip policy
// still waits for the last run's job, which the replacement keeps.
func TestIssue32PutDisablesAndEnables(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 60)
	p := e.start(0, nil)
	ctx := testCtx(t)
	cj := everyMinute("toggled", "crontoggle")
	cj.OverlapPolicy = ojs.CronOverlapAllow
	created := register(t, p, cj)
	e.waitJobs(1, 60*time.Second)
	put := func(enabled bool, policy string) *ojs.CronJob {
		t.Helper()
		out, made, err := p.sched.CronPut(ctx, "toggled", func(cur *ojs.CronJob) (ojs.CronJob, error) {
			c := *cur
			c.Enabled, c.OverlapPolicy = &enabled, policy
			return c, nil
		})
		if err != nil || made {
			t.Fatalf("put enabled=%v: %v (created %v)", enabled, err, made)
		}
		return out
	}
	off := put(false, ojs.CronOverlapSkip)
	if off.IsEnabled() || off.NextRunAt != nil || off.CreatedAt.UnixMilli() != created.CreatedAt.UnixMilli() {
		t.Fatalf("disabled: %+v", off)
	}
	n, _ := e.rec.snapshot()
	// A witness cron job shows three ticks passing; the disabled one
	// enqueues nothing meanwhile.
	register(t, p, everyMinute("witness", "cronwitness"))
	e.waitJobs(len(n)+3, 60*time.Second)
	count := func() int {
		ids, _ := e.rec.snapshot()
		c := 0
		for _, id := range ids {
			if j, err := p.svc.Get(ctx, id); err == nil && j.Queue == "crontoggle" {
				c++
			}
		}
		return c
	}
	if c := count(); c != len(n) {
		t.Fatalf("a disabled cron job enqueued %d jobs", c-len(n))
	}
	on := put(true, ojs.CronOverlapSkip)
	if !on.IsEnabled() || on.NextRunAt == nil || on.LastJobID != off.LastJobID {
		t.Fatalf("enabled again: %+v", on)
	}
	// Skip: the last run's job is still available, so no tick enqueues.
	deadline := time.Now().Add(30 * time.Second)
	for {
		def, err := p.sched.CronJob(ctx, "toggled")
		if err != nil {
			t.Fatal(err)
		}
		if def.NextRunAt.Sub(on.NextRunAt.Time) >= 3*time.Minute {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the enabled cron job does not tick")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if c := count(); c != len(n) {
		t.Fatalf("skip enqueued %d jobs while the last run was unfinished", c-len(n))
	}
}
