package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// settings of a run, from the environment.
type settings struct {
	rounds int           // JETGATE_CHAOS_ROUNDS (unset: shortRounds, or none with -short; 0: TestChaos is skipped)
	load   time.Duration // JETGATE_CHAOS_ROUND: least time of load per round (10s)
	drain  time.Duration // JETGATE_CHAOS_DRAIN: how long an accepted job may take to end (150s)
	calm   bool          // JETGATE_CHAOS_CALM=1: the same load and checks, nothing killed (a baseline)
	// logLevel is JETGATE_CHAOS_LOG_LEVEL: the jetgate processes' --log-level (warn).
	logLevel string
}

// shortRounds is the short form's number of rounds: TestChaos runs it in
// every `go test ./...` without -short (about two minutes).
const shortRounds = 3

func readSettings(t *testing.T) settings {
	t.Helper()
	s := settings{load: 10 * time.Second, drain: 150 * time.Second, logLevel: "warn"}
	if v := os.Getenv("JETGATE_CHAOS_LOG_LEVEL"); v != "" {
		s.logLevel = v
	}
	if !testing.Short() {
		s.rounds = shortRounds
	}
	if v := os.Getenv("JETGATE_CHAOS_ROUNDS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			t.Fatalf("JETGATE_CHAOS_ROUNDS=%q: want a number of rounds", v)
		}
		s.rounds = n
	}
	s.calm = os.Getenv("JETGATE_CHAOS_CALM") == "1"
	for env, dst := range map[string]*time.Duration{"JETGATE_CHAOS_ROUND": &s.load, "JETGATE_CHAOS_DRAIN": &s.drain} {
		if v := os.Getenv(env); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 {
				t.Fatalf("%s=%q: want a duration", env, v)
			}
			*dst = d
		}
	}
	return s
}

// TestChaos is the process-level chaos suite of issue 20 ("Chaos at the
// process level"): 3 jetgate binaries on a 3-node NATS cluster under a
// mixed HTTP load; each round kills -9 and restarts one jetgate process and
// one NATS node and kills workers in the middle of their jobs; the observer
// checks the invariants of package doc after every round. Run it with
// the short form by default (shortRounds rounds: what `go test ./...`, and
// so .ci/run, runs), or JETGATE_CHAOS_ROUNDS=100 (task chaos).
func TestChaos(t *testing.T) {
	s := readSettings(t)
	if s.rounds == 0 {
		t.Skip("the process-level chaos suite is off (-short, or JETGATE_CHAOS_ROUNDS=0); see docs/chaos.md")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	begin := time.Now()
	bins := buildBinaries(t)
	c := startCluster(ctx, t, bins, []string{
		"--log-level", s.logLevel,
		"--default-heartbeat-timeout", jobHeartbeatTimeout.String(),
		"--shutdown-timeout", "2s",
	})
	r := &run{t: t, s: s, c: c, api: newAPI(c.baseURLs), rec: newRecorder(), begin: begin}
	r.l = &load{api: r.api, rec: r.rec}
	r.setup(ctx)
	defer r.stopWorkers()
	for round := 1; round <= s.rounds; round++ {
		r.round(ctx, round)
	}
	r.finish(ctx)
}

// run is one TestChaos run.
type run struct {
	t     *testing.T
	s     settings
	c     *cluster
	api   *api
	rec   *recorder
	l     *load
	begin time.Time

	workers       []*worker
	workerSeq     int
	violations    []violation
	reported      map[string]bool
	keysChecked   map[string]bool
	missingEvents int
	kills         struct{ jetgate, nats, workers, abandoned int }
}

// Worker sets: two that serve the main and bounded queues, two the limited
// keys.
var workerSets = []struct {
	queues []string
	count  int
}{
	{[]string{queueMain, queueBounded}, 2},
	{[]string{queueMain, queueBounded}, 2},
	{[]string{queueLimits}, 3},
	{[]string{queueLimits}, 3},
}

func (r *run) setup(ctx context.Context) {
	t := r.t
	rep := r.api.do(ctx, http.MethodPut, "/ojs/v1/admin/queues/"+queueBounded+"/config",
		map[string]any{"backpressure": map[string]any{"max_depth": boundedDepth, "strategy": "reject", "count_active": true}})
	if rep.status != http.StatusOK {
		t.Fatalf("bound %s: %s", queueBounded, rep)
	}
	nc, err := nats.Connect(strings.Join(r.c.natsURLs, ","), nats.MaxReconnects(-1),
		nats.ReconnectWait(100*time.Millisecond), nats.Name("chaos observer"))
	if err != nil {
		t.Fatalf("observer connect: %v", err)
	}
	t.Cleanup(nc.Close)
	sub, err := nc.Subscribe("ojs.events.job.>", func(m *nats.Msg) {
		var ev struct {
			Type    string `json:"type"`
			Subject string `json:"subject"`
		}
		if json.Unmarshal(m.Data, &ev) != nil {
			return
		}
		switch ev.Type {
		case "job.completed", "job.discarded", "job.cancelled":
			r.rec.event(ev.Type, ev.Subject)
		}
	})
	if err != nil {
		t.Fatalf("observer subscribe: %v", err)
	}
	_ = sub.SetPendingLimits(-1, -1)
	if err := nc.Flush(); err != nil {
		t.Fatalf("observer flush: %v", err)
	}
	r.reported = map[string]bool{}
	for i := range workerSets {
		r.workers = append(r.workers, r.newWorker(ctx, i))
	}
}

func (r *run) newWorker(ctx context.Context, set int) *worker {
	r.workerSeq++
	ws := workerSets[set]
	return r.l.startWorker(ctx, fmt.Sprintf("w%d-set%d", r.workerSeq, set), ws.queues, ws.count)
}

func (r *run) stopWorkers() {
	for _, w := range r.workers {
		w.cancel()
		<-w.done
	}
}

// round runs the load for at least s.load while it kills, in turn, a
// jetgate process, a worker holding jobs, a NATS node and another worker;
// then the observer checks.
func (r *run) round(ctx context.Context, round int) {
	start := time.Now()
	loadCtx, stopLoad := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { r.l.produce(loadCtx, round) })
	wg.Go(func() { r.sampleDepth(loadCtx) })

	if !r.s.calm {
		jg, node := (round-1)%3, (round+1)%3
		r.step(loadCtx, 1500*time.Millisecond)
		r.killJetgate(ctx, jg)
		r.killWorker(loadCtx, round)
		r.step(loadCtx, time.Second)
		r.killNATS(ctx, node)
		r.killWorker(loadCtx, round+1)
	}
	if rest := r.s.load - time.Since(start); rest > 0 {
		sleepCtx(ctx, rest)
	}
	stopLoad()
	wg.Wait()
	r.refresh(ctx, false)
	fresh := r.check(false)
	st := r.stats()
	refused, unclear := r.rec.requests()
	r.t.Logf("round %d/%d (%s): accepted %d, finished %d (completed %d, discarded %d), open %d %s (oldest %s, %d jobs open or ended after more than %s), refused 429 %d, unclear requests %d, attempts %d, kills jetgate %d nats %d workers %d (jobs abandoned %d), violations %d (new %d)",
		round, r.s.rounds, time.Since(start).Round(100*time.Millisecond), st.accepted, st.completed+st.discarded+st.cancelled,
		st.completed, st.discarded, st.open, r.openByKind(), st.oldestOpen.Round(time.Second), st.late, r.s.drain, refused, unclear, st.attempts,
		r.kills.jetgate, r.kills.nats, r.kills.workers, r.kills.abandoned, len(r.violations), fresh)
}

// step lets the load run for d.
func (r *run) step(ctx context.Context, d time.Duration) { sleepCtx(ctx, d) }

func (r *run) killJetgate(ctx context.Context, i int) {
	p := r.c.jetgates[i]
	r.api.setDown(i, true)
	p.kill()
	r.kills.jetgate++
	sleepCtx(ctx, time.Second)
	if err := p.start(); err != nil {
		r.t.Fatal(err)
	}
	if err := r.c.waitJetgateReady(ctx, i, 90*time.Second); err != nil {
		r.add(violation{p.name, "not ready after a restart: " + err.Error(), time.Now()})
		return
	}
	r.api.setDown(i, false)
}

func (r *run) killNATS(ctx context.Context, i int) {
	p := r.c.nats[i]
	p.kill()
	r.kills.nats++
	sleepCtx(ctx, 1500*time.Millisecond)
	if err := p.start(); err != nil {
		r.t.Fatal(err)
	}
	if err := r.c.waitNATSHealthy(ctx, i, 120*time.Second); err != nil {
		r.t.Fatalf("NATS node did not come back (not a jetgate defect; the run cannot go on): %v", err)
	}
}

// killWorker kills a worker that holds jobs (the busiest, after waiting up
// to 2 s for one to hold any) and starts a replacement in its set.
func (r *run) killWorker(ctx context.Context, pick int) {
	deadline := time.Now().Add(2 * time.Second)
	for {
		best := -1
		for i, w := range r.workers {
			if w.busy() > 0 && (best < 0 || w.busy() > r.workers[best].busy()) {
				best = i
			}
		}
		if best < 0 && time.Now().Before(deadline) && sleepCtx(ctx, 20*time.Millisecond) {
			continue
		}
		if best < 0 {
			best = pick % len(r.workers)
		}
		set := setOf(r.workers[best].id)
		r.kills.abandoned += r.workers[best].kill()
		r.kills.workers++
		r.workers[best] = r.newWorker(context.Background(), set)
		return
	}
}

func setOf(workerID string) int {
	i := strings.LastIndex(workerID, "set")
	n, _ := strconv.Atoi(workerID[i+3:])
	return n
}

// sampleDepth reads the bounded queue's depth from any jetgate every 250 ms.
func (r *run) sampleDepth(ctx context.Context) {
	for sleepCtx(ctx, 250*time.Millisecond) {
		rep := r.api.do(ctx, http.MethodGet, "/ojs/v1/queues/"+queueBounded+"/stats", nil)
		if rep.status != http.StatusOK {
			continue
		}
		var got struct {
			Stats struct {
				Depth *int `json:"depth"`
			} `json:"stats"`
		}
		if json.Unmarshal(rep.body, &got) != nil || got.Stats.Depth == nil {
			continue
		}
		d := *got.Stats.Depth
		r.rec.update(func() {
			r.rec.depthSamples++
			r.rec.maxDepthSeen = max(r.rec.maxDepthSeen, d)
		})
		if d > boundedDepth {
			r.l.problem(violation{"queue " + queueBounded, fmt.Sprintf("stats report depth %d above the bound %d (count_active: no overdraft allowed); stats %s",
				d, boundedDepth, rep.body), time.Now()})
		}
	}
}

// openByKind is the producers' backlog per kind, as the last refresh read it.
func (r *run) openByKind() string {
	r.l.mu.Lock()
	defer r.l.mu.Unlock()
	var parts []string
	seen := map[string]bool{}
	for i := range kinds {
		g := kinds[i].backlogGroup()
		if n := r.l.backlog[g]; n > 0 && !seen[g] {
			parts = append(parts, fmt.Sprintf("%s %d", strings.TrimPrefix(g, "chaos."), n))
		}
		seen[g] = true
	}
	return "(" + strings.Join(parts, ", ") + ")"
}
