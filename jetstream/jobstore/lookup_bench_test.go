package jobstore_test

// Issue 17: a job's first write becomes its only enqueue write (the ready
// message carries the whole job), so GET of an available job must find it
// without a record in OJS_JOBS. These benchmarks measure the candidate: a
// ready subject that ends with the job id, ojs.ready.<queue>.<priority>.<id>,
// read with a (direct or leader) get of the last message on
// ojs.ready.*.*.<id>; against a KV Get of a record (today), and what the
// per-job subjects cost the rest of the ready stream's work (publish,
// fetch+ack, level lookups, the server's memory). The results and the
// choice are in doc.go. JETGATE_LOOKUP_N sets the number of stored
// messages (default 2,000, so that the suite stays a quick test too).

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetgate/jetgate/jetstream/natstest"
	"github.com/jetgate/jetgate/jetstream/topology"
)

const (
	lookupQueues = 10
	lookupPrios  = 3
	lookupBody   = 200
)

// lookupN is the number of ready messages (and KV records) a fixture holds.
func lookupN(tb testing.TB) int {
	v := os.Getenv("JETGATE_LOOKUP_N")
	if v == "" {
		return 2000
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < lookupQueues*lookupPrios {
		tb.Fatalf("JETGATE_LOOKUP_N=%q: want a number ≥ %d", v, lookupQueues*lookupPrios)
	}
	return n
}

// lookupFixture is an embedded server with the ready stream and job bucket
// of topology.Ensure (file storage, one replica) holding n jobs.
type lookupFixture struct {
	// queues × prios levels, job i on queue q<i%queues>, level
	// (i/queues)%prios.
	queues, prios int

	ctx    context.Context
	nc     *nats.Conn
	js     jetstream.JetStream
	assets *topology.Assets
	perJob bool
	ids    []string
	// heapPerMsg is the growth of the process's live heap per stored
	// message while the fixture was filled (server and client share it).
	heapPerMsg float64
}

func newLookupFixture(tb testing.TB, n, queues, prios int, perJob, records bool) *lookupFixture {
	tb.Helper()
	return newLookupFixtureReplicas(tb, n, queues, prios, perJob, records, 1)
}

// newLookupFixtureReplicas is newLookupFixture on a 3-node cluster when
// replicas is 3 (streams and buckets R3, direct gets off as Ensure sets
// them, the client connected to any node).
func newLookupFixtureReplicas(tb testing.TB, n, queues, prios int, perJob, records bool, replicas int) *lookupFixture {
	tb.Helper()
	var nc *nats.Conn
	var js jetstream.JetStream
	if replicas > 1 {
		c := natstest.RunCluster(tb, replicas)
		c.WaitReady(tb)
		nc, js = c.Connect(tb)
	} else {
		nc, js = natstest.Connect(tb, natstest.RunServer(tb))
	}
	ctx, cancel := context.WithCancel(context.Background())
	tb.Cleanup(cancel)
	assets, err := topology.Ensure(ctx, js, topology.Config{Replicas: replicas})
	if err != nil {
		tb.Fatal(err)
	}
	fx := &lookupFixture{queues: queues, prios: prios, ctx: ctx, nc: nc, js: js, assets: assets, perJob: perJob, ids: make([]string, n)}
	for i := range fx.ids {
		fx.ids[i] = uuid.Must(uuid.NewV7()).String()
	}
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	fx.publish(tb, n, func(i int) (string, []byte) { return fx.subject(i), jobBody(fx.ids[i]) })
	runtime.GC()
	runtime.ReadMemStats(&after)
	fx.heapPerMsg = (float64(after.HeapAlloc) - float64(before.HeapAlloc)) / float64(n)
	if records {
		fx.publish(tb, n, func(i int) (string, []byte) {
			return "$KV." + topology.JobsBucket + "." + fx.ids[i], jobBody(fx.ids[i])
		})
	}
	return fx
}

// levelSubject is today's ready subject of job i; jobSubject the per-job
// subject of issue 17.
func (fx *lookupFixture) levelSubject(i int) string {
	return topology.ReadyLegacySubject("q"+strconv.Itoa(i%fx.queues), (i/fx.queues)%fx.prios)
}

func (fx *lookupFixture) jobSubject(i int, id string) string {
	return fx.levelSubject(i) + "." + topology.Token(id)
}

func (fx *lookupFixture) subject(i int) string {
	if fx.perJob {
		return fx.jobSubject(i, fx.ids[i])
	}
	return fx.levelSubject(i)
}

// jobBody is a 200-byte job.
func jobBody(id string) []byte {
	b := fmt.Appendf(nil, `{"id":%q,"type":"bench.noop","state":"available","args":[`, id)
	for len(b) < lookupBody-3 {
		b = append(b, '1', ',')
	}
	return append(b[:lookupBody-3], `0]}`...)
}

// publish stores n messages with async publishes, 1,000 in flight at most.
func (fx *lookupFixture) publish(tb testing.TB, n int, msg func(i int) (string, []byte)) {
	tb.Helper()
	const window = 1000
	for start := 0; start < n; start += window {
		for i := start; i < min(n, start+window); i++ {
			subj, body := msg(i)
			if _, err := fx.js.PublishAsync(subj, body); err != nil {
				tb.Fatal(err)
			}
		}
		select {
		case <-fx.js.PublishAsyncComplete():
		case <-time.After(30 * time.Second):
			tb.Fatal("async publishes not acknowledged within 30s")
		}
	}
}

// readyView returns a handle of the ready stream with direct gets on or
// off. Off is how a replicated jetgate runs (topology.Ensure): every get
// is a JetStream API request answered by the stream leader.
func (fx *lookupFixture) readyView(tb testing.TB, direct bool) jetstream.Stream {
	tb.Helper()
	return setAllowDirect(tb, fx.ctx, fx.js, topology.ReadyStream, direct)
}

func setAllowDirect(tb testing.TB, ctx context.Context, js jetstream.JetStream, stream string, direct bool) jetstream.Stream {
	tb.Helper()
	s, err := js.Stream(ctx, stream)
	if err != nil {
		tb.Fatal(err)
	}
	if cfg := s.CachedInfo().Config; cfg.AllowDirect != direct {
		cfg.AllowDirect = direct
		if _, err := js.UpdateStream(ctx, cfg); err != nil {
			tb.Fatal(err)
		}
		if s, err = js.Stream(ctx, stream); err != nil {
			tb.Fatal(err)
		}
	}
	return s
}

// findJob is the lookup of issue 17: the last message on
// ojs.ready.*.*.<id> (wildcard queue and priority).
func findJob(ctx context.Context, ready jetstream.Stream, id string) (*jetstream.RawStreamMsg, error) {
	return ready.GetLastMsgForSubject(ctx, "ojs.ready.*.*."+topology.Token(id))
}

// Issue 17, "A job's first write is its only enqueue write": with per-job
// ready subjects an available job is found by id with a get of the last
// message on ojs.ready.*.*.<id>, direct or through the leader, and a job
// whose ready message was acked (claimed) or removed is not found.
func TestReadyLookupByID(t *testing.T) {
	n := min(lookupN(t), 600)
	fx := newLookupFixture(t, n, lookupQueues, lookupPrios, true, false)
	ctx := fx.ctx
	check := func(ready jetstream.Stream, i int) {
		t.Helper()
		for _, subj := range []string{"ojs.ready.*.*." + fx.ids[i], fx.jobSubject(i, fx.ids[i])} {
			m, err := ready.GetLastMsgForSubject(ctx, subj)
			if err != nil {
				t.Fatalf("get last on %s: %v", subj, err)
			}
			if m.Subject != fx.jobSubject(i, fx.ids[i]) || !strings.Contains(string(m.Data), fx.ids[i]) {
				t.Fatalf("get last on %s = %s %q, want job %s on %s", subj, m.Subject, m.Data, fx.ids[i], fx.jobSubject(i, fx.ids[i]))
			}
		}
	}
	notFound := func(ready jetstream.Stream, id string) {
		t.Helper()
		if m, err := findJob(ctx, ready, id); !errors.Is(err, jetstream.ErrMsgNotFound) {
			t.Fatalf("job %s: got %v, %v; want not found", id, m, err)
		}
	}
	direct := fx.readyView(t, true)
	for _, i := range []int{0, 1, n / 2, n - 1} {
		check(direct, i)
	}
	notFound(direct, uuid.Must(uuid.NewV7()).String())
	// The same lookup as a batched direct get (multi_last): the subject
	// tree gives the job's subject, then its last message is read by
	// exact subject.
	d := newDirectGets(t, fx.nc)
	multi := func(i int, want []string) {
		t.Helper()
		got, tooMany, err := d.multiLast("ojs.ready.*.*." + fx.ids[i])
		if err != nil || tooMany || !slices.Equal(got, want) {
			t.Fatalf("multi_last of job %d = %v (too many: %v), %v; want %v", i, got, tooMany, err, want)
		}
	}
	multi(0, []string{fx.jobSubject(0, fx.ids[0])})
	multi(n-1, []string{fx.jobSubject(n-1, fx.ids[n-1])})

	// Claim: a worker fetches job 0's message from its level and acks it;
	// the work-queue stream removes it, and the lookup no longer finds it.
	cons, err := fx.js.CreateConsumer(ctx, topology.ReadyStream, jetstream.ConsumerConfig{
		FilterSubject: fx.levelSubject(0) + ".>",
		AckPolicy:     jetstream.AckExplicitPolicy,
	})
	if err != nil {
		t.Fatal(err)
	}
	batch, err := cons.Fetch(1, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var claimed []string
	for m := range batch.Messages() {
		claimed = append(claimed, m.Subject())
		if err := m.DoubleAck(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if !slices.Equal(claimed, []string{fx.jobSubject(0, fx.ids[0])}) {
		t.Fatalf("fetched %v, want job 0 (%s) first on its level", claimed, fx.jobSubject(0, fx.ids[0]))
	}
	notFound(direct, fx.ids[0])
	multi(0, nil)
	// Removed by sequence (cancel, discard): gone too.
	m, err := findJob(ctx, direct, fx.ids[1])
	if err != nil {
		t.Fatal(err)
	}
	if err := direct.DeleteMsg(ctx, m.Sequence); err != nil {
		t.Fatal(err)
	}
	notFound(direct, fx.ids[1])
	check(direct, 2)

	// Leader reads (a replicated jetgate turns direct gets off).
	leader := fx.readyView(t, false)
	check(leader, 2)
	check(leader, n-1)
	notFound(leader, fx.ids[0])
	notFound(leader, fx.ids[1])
}

// BenchmarkReadyLookup: GET of an available job by id (issue 17) against
// a KV Get of its record. Run with
//
//	JETGATE_LOOKUP_N=100000 go test -run '^$' -bench ReadyLookup -benchtime 20000x ./jetstream/jobstore/
func BenchmarkReadyLookup(b *testing.B) {
	benchReadyLookup(b, lookupQueues, lookupPrios, true)
}

// BenchmarkReadyLookupManyLevels is BenchmarkReadyLookup with 40 queues ×
// 256 priority levels in use (10,240 levels: the wildcards of
// ojs.ready.*.*.<id> walk every level of the subject tree), without KV.
// JETGATE_LOOKUP_LEVELS=<queues>x<levels> sets another spread.
func BenchmarkReadyLookupManyLevels(b *testing.B) {
	queues, prios := 40, 256
	if v := os.Getenv("JETGATE_LOOKUP_LEVELS"); v != "" {
		q, p, _ := strings.Cut(v, "x")
		var err1, err2 error
		queues, err1 = strconv.Atoi(q)
		prios, err2 = strconv.Atoi(p)
		if err1 != nil || err2 != nil || queues < 1 || prios < 1 || prios > 999 {
			b.Fatalf("JETGATE_LOOKUP_LEVELS=%q: want <queues>x<levels>, levels ≤ 999", v)
		}
	}
	benchReadyLookup(b, queues, prios, false)
}

func benchReadyLookup(b *testing.B, queues, prios int, records bool) {
	n := lookupN(b)
	start := time.Now()
	fx := newLookupFixture(b, n, queues, prios, true, records)
	b.Logf("%d ready messages (per-job subjects, %d×%d levels), records: %v, stored in %s", n, queues, prios, records, time.Since(start).Round(time.Millisecond))
	ctx := fx.ctx
	ready := func(direct bool) func(b *testing.B) jetstream.Stream {
		return func(b *testing.B) jetstream.Stream { return fx.readyView(b, direct) }
	}
	bench := func(name string, view func(b *testing.B) jetstream.Stream, get func(s jetstream.Stream, i int) error) {
		b.Run(name, func(b *testing.B) {
			s := view(b)
			timed(b, func(i int) error { return get(s, i) }, n)
		})
	}
	wildcard := func(s jetstream.Stream, i int) error {
		m, err := findJob(ctx, s, fx.ids[i])
		if err == nil && !strings.HasSuffix(m.Subject, fx.ids[i]) {
			err = fmt.Errorf("found %s for job %s", m.Subject, fx.ids[i])
		}
		return err
	}
	exact := func(s jetstream.Stream, i int) error {
		m, err := s.GetLastMsgForSubject(ctx, fx.jobSubject(i, fx.ids[i]))
		if err == nil && m.Subject != fx.jobSubject(i, fx.ids[i]) {
			err = fmt.Errorf("found %s for job %s", m.Subject, fx.ids[i])
		}
		return err
	}
	missing := func(s jetstream.Stream, i int) error {
		_, err := findJob(ctx, s, uuid.Must(uuid.NewV7()).String())
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return nil
		}
		return fmt.Errorf("lookup of an unknown job: %v", err)
	}
	b.Run("direct/multi-last", func(b *testing.B) {
		fx.readyView(b, true)
		d := newDirectGets(b, fx.nc)
		timed(b, func(i int) error {
			subjects, _, err := d.multiLast("ojs.ready.*.*." + fx.ids[i])
			if err == nil && !slices.Equal(subjects, []string{fx.jobSubject(i, fx.ids[i])}) {
				err = fmt.Errorf("found %v for job %s", subjects, fx.ids[i])
			}
			return err
		}, n)
	})
	b.Run("direct/multi-last-missing", func(b *testing.B) {
		fx.readyView(b, true)
		d := newDirectGets(b, fx.nc)
		timed(b, func(i int) error {
			subjects, _, err := d.multiLast("ojs.ready.*.*." + uuid.Must(uuid.NewV7()).String())
			if err == nil && len(subjects) > 0 {
				err = fmt.Errorf("found %v for an unknown job", subjects)
			}
			return err
		}, n)
	})
	bench("direct/wildcard", ready(true), wildcard)
	bench("direct/exact", ready(true), exact)
	bench("direct/wildcard-missing", ready(true), missing)
	b.Run("direct/wildcard-parallel", func(b *testing.B) {
		s := fx.readyView(b, true)
		b.ReportAllocs()
		b.SetParallelism(2)
		start := time.Now()
		b.RunParallel(func(pb *testing.PB) {
			r := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
			for pb.Next() {
				if err := wildcard(s, r.IntN(n)); err != nil {
					b.Error(err)
					return
				}
			}
		})
		b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "ops/s")
	})
	bench("leader/wildcard", ready(false), wildcard)
	bench("leader/exact", ready(false), exact)
	bench("leader/wildcard-missing", ready(false), missing)
	fx.readyView(b, true)
	if !records {
		return
	}

	kvGet := func(direct bool) func(b *testing.B) {
		return func(b *testing.B) {
			setAllowDirect(b, ctx, fx.js, "KV_"+topology.JobsBucket, direct)
			kv, err := fx.js.KeyValue(ctx, topology.JobsBucket)
			if err != nil {
				b.Fatal(err)
			}
			timed(b, func(i int) error {
				e, err := kv.Get(ctx, fx.ids[i])
				if err == nil && e.Key() != fx.ids[i] {
					err = fmt.Errorf("got %s for %s", e.Key(), fx.ids[i])
				}
				return err
			}, n)
		}
	}
	b.Run("kv/direct", kvGet(true))
	b.Run("kv/leader", kvGet(false))
}

// BenchmarkReadyLookupR3 is the lookup on a 3-node cluster (in one
// process on loopback), R3 streams with direct gets off as jetgate runs
// them: every get is answered by the stream leader, which may be another
// node than the client's.
//
//	JETGATE_LOOKUP_N=100000 go test -run '^$' -bench ReadyLookupR3 -benchtime 1s ./jetstream/jobstore/
func BenchmarkReadyLookupR3(b *testing.B) {
	n := lookupN(b)
	start := time.Now()
	fx := newLookupFixtureReplicas(b, n, lookupQueues, lookupPrios, true, true, 3)
	b.Logf("R3: %d ready messages and %d records stored in %s", n, n, time.Since(start).Round(time.Millisecond))
	ctx := fx.ctx
	ready, err := fx.js.Stream(ctx, topology.ReadyStream)
	if err != nil {
		b.Fatal(err)
	}
	if ready.CachedInfo().Config.AllowDirect {
		b.Fatal("R3 ready stream with direct gets on")
	}
	b.Run("leader/wildcard", func(b *testing.B) {
		timed(b, func(i int) error {
			m, err := findJob(ctx, ready, fx.ids[i])
			if err == nil && m.Subject != fx.jobSubject(i, fx.ids[i]) {
				err = fmt.Errorf("found %s for job %s", m.Subject, fx.ids[i])
			}
			return err
		}, n)
	})
	b.Run("leader/exact", func(b *testing.B) {
		timed(b, func(i int) error {
			_, err := ready.GetLastMsgForSubject(ctx, fx.jobSubject(i, fx.ids[i]))
			return err
		}, n)
	})
	b.Run("leader/wildcard-missing", func(b *testing.B) {
		timed(b, func(int) error {
			if _, err := findJob(ctx, ready, uuid.Must(uuid.NewV7()).String()); !errors.Is(err, jetstream.ErrMsgNotFound) {
				return fmt.Errorf("lookup of an unknown job: %v", err)
			}
			return nil
		}, n)
	})
	b.Run("kv/leader", func(b *testing.B) {
		timed(b, func(i int) error {
			_, err := fx.assets.Jobs.Get(ctx, fx.ids[i])
			return err
		}, n)
	})
}

// timed runs op b.N times on random jobs and reports ns/op, p50, p99 and
// ops/s.
func timed(b *testing.B, op func(i int) error, n int) {
	b.Helper()
	r := rand.New(rand.NewPCG(1, 2))
	lat := make([]time.Duration, 0, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		t := time.Now()
		if err := op(r.IntN(n)); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t))
	}
	elapsed := time.Since(start)
	b.StopTimer()
	reportLatency(b, lat, elapsed)
}

func reportLatency(b *testing.B, lat []time.Duration, elapsed time.Duration) {
	b.Helper()
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
	b.ReportMetric(float64(len(lat))/elapsed.Seconds(), "ops/s")
}

// BenchmarkReadyLayout: what per-job ready subjects cost the rest of the
// ready stream's work, against today's per-level subjects, with N jobs
// stored on 10 queues × 3 levels. Run with
//
//	JETGATE_LOOKUP_N=100000 go test -run '^$' -bench ReadyLayout -benchtime 2s ./jetstream/jobstore/
func BenchmarkReadyLayout(b *testing.B) {
	n := lookupN(b)
	for _, layout := range []string{"per-level", "per-job"} {
		b.Run(layout, func(b *testing.B) {
			perJob := layout == "per-job"
			fx := newLookupFixture(b, n, lookupQueues, lookupPrios, perJob, false)
			b.Logf("%s: %d stored, live heap +%.0f B per message", layout, n, fx.heapPerMsg)
			b.Run("publish-async", func(b *testing.B) { benchPublish(b, fx) })
			b.Run("fetch10-ack", func(b *testing.B) { benchFetchAck(b, fx, 10) })
			b.Run("fetch1-ack", func(b *testing.B) { benchFetchAck(b, fx, 1) })
			// The level lookups of a fetch (levels.go), as jetgate does
			// them today: levels of the queue q0 from the subjects that
			// hold messages.
			infoFilter := topology.ReadyQueueFilter("q0")
			if perJob {
				infoFilter += ".*"
			}
			b.Run("levels-stream-info", func(b *testing.B) {
				timed(b, func(int) error {
					info, err := fx.assets.Ready.Info(fx.ctx, jetstream.WithSubjectFilter(infoFilter))
					if err == nil && len(info.State.Subjects) == 0 {
						err = errors.New("no subjects")
					}
					return err
				}, 1)
			})
			// The levels' consumers (jetgate has one per level in use):
			// their info counts the level's messages (num_pending), kept
			// by the server as messages arrive and go.
			levelCons := make([]jetstream.Consumer, lookupPrios)
			created := time.Now()
			for p := range lookupPrios {
				filter := topology.ReadyLegacySubject("q0", p)
				if perJob {
					filter += ".>"
				}
				c, err := fx.js.CreateOrUpdateConsumer(fx.ctx, topology.ReadyStream, jetstream.ConsumerConfig{
					Durable:       topology.ReadyConsumer("q0", p),
					FilterSubject: filter,
					AckPolicy:     jetstream.AckExplicitPolicy,
				})
				if err != nil {
					b.Fatal(err)
				}
				levelCons[p] = c
			}
			// Creating a level consumer counts the level's messages.
			b.Logf("%s: %d level consumers of q0 created in %s", layout, lookupPrios, time.Since(created).Round(time.Microsecond))
			b.Run("levels-consumer-info", func(b *testing.B) {
				timed(b, func(int) error {
					for _, c := range levelCons {
						info, err := c.Info(fx.ctx)
						if err != nil {
							return err
						}
						if info.NumPending == 0 {
							return fmt.Errorf("level %s: no messages", info.Name)
						}
					}
					return nil
				}, 1)
			})
			if !perJob {
				// What ReadyLevels asked before the level registry.
				b.Run("levels-multi-last", func(b *testing.B) {
					d := newDirectGets(b, fx.nc)
					timed(b, func(int) error {
						subjects, _, err := d.multiLast("ojs.ready.q0.*")
						if err == nil && len(subjects) != lookupPrios {
							err = fmt.Errorf("levels %v", subjects)
						}
						return err
					}, 1)
				})
				return
			}
			// Per-job subjects: multi_last on ojs.ready.q0.*.* answers one
			// message per job (413 past 1,024); a level's presence is a
			// wildcard last get per level, ojs.ready.q0.<p>.*.
			b.Run("levels-multi-last", func(b *testing.B) {
				d := newDirectGets(b, fx.nc)
				timed(b, func(int) error {
					subjects, tooMany, err := d.multiLast("ojs.ready.q0.*.*")
					if err == nil && len(subjects) == 0 && !tooMany {
						err = errors.New("no subjects")
					}
					return err
				}, 1)
			})
			b.Run("levels-last-per-level", func(b *testing.B) {
				ready := fx.readyView(b, true)
				timed(b, func(int) error {
					for p := range lookupPrios {
						if _, err := ready.GetLastMsgForSubject(fx.ctx, topology.ReadyLegacySubject("q0", p)+".*"); err != nil {
							return err
						}
					}
					return nil
				}, 1)
			})
			b.Run("levels-first-per-level", func(b *testing.B) {
				ready := fx.readyView(b, true)
				timed(b, func(int) error {
					for p := range lookupPrios {
						if _, err := ready.GetMsg(fx.ctx, 1, jetstream.WithGetMsgSubject(topology.ReadyLegacySubject("q0", p)+".*")); err != nil {
							return err
						}
					}
					return nil
				}, 1)
			})
		})
	}
}

// benchPublish stores b.N more ready messages on queue qp, async, 1,000
// in flight, then purges them.
func benchPublish(b *testing.B, fx *lookupFixture) {
	ids := make([]string, b.N)
	for i := range ids {
		ids[i] = uuid.Must(uuid.NewV7()).String()
	}
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	fx.publish(b, b.N, func(i int) (string, []byte) {
		subj := topology.ReadyLegacySubject("qp", i%lookupPrios)
		if fx.perJob {
			subj += "." + ids[i]
		}
		return subj, jobBody(ids[i])
	})
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "ops/s")
	// Leave the fixture as it was for the benchmarks that follow.
	if err := fx.assets.Ready.Purge(fx.ctx, jetstream.WithPurgeSubject("ojs.ready.qp.>")); err != nil {
		b.Fatal(err)
	}
}

// benchFetchAck stores b.N messages on one level of queue qf (behind the
// fixture's backlog on other queues), then drains them with a durable pull
// consumer filtered like jetgate's level consumers (ojs.ready.qf.000, or
// ojs.ready.qf.000.> with per-job subjects): Fetch(batch) and one ack per
// message. ns/op is per message.
func benchFetchAck(b *testing.B, fx *lookupFixture, batch int) {
	level := topology.ReadyLegacySubject("qf", 0)
	filter := level
	if fx.perJob {
		filter += ".>"
	}
	b.StopTimer()
	fx.publish(b, b.N, func(i int) (string, []byte) {
		id := uuid.Must(uuid.NewV7()).String()
		if fx.perJob {
			return level + "." + id, jobBody(id)
		}
		return level, jobBody(id)
	})
	name := "bench_fetch_" + strconv.Itoa(batch)
	cons, err := fx.js.CreateOrUpdateConsumer(fx.ctx, topology.ReadyStream, jetstream.ConsumerConfig{
		Durable:       name,
		FilterSubject: filter,
		AckPolicy:     jetstream.AckExplicitPolicy,
		MaxAckPending: 10_000,
	})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.StartTimer()
	start := time.Now()
	for got := 0; got < b.N; {
		msgs, err := cons.Fetch(min(batch, b.N-got), jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			b.Fatal(err)
		}
		for m := range msgs.Messages() {
			if err := m.Ack(); err != nil {
				b.Fatal(err)
			}
			got++
		}
		if err := msgs.Error(); err != nil {
			b.Fatal(err)
		}
	}
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "ops/s")
	// Wait until every ack removed its message, then drop the consumer.
	deadline := time.Now().Add(30 * time.Second)
	for {
		info, err := cons.Info(fx.ctx)
		if err != nil {
			b.Fatal(err)
		}
		if info.NumAckPending == 0 && info.NumPending == 0 {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("acks not processed: %d pending, %d unacked", info.NumPending, info.NumAckPending)
		}
		runtime.Gosched()
	}
	if err := fx.js.DeleteConsumer(fx.ctx, topology.ReadyStream, name); err != nil {
		b.Fatal(err)
	}
}

// directGets sends batched direct gets (ADR-31) to the ready stream, one
// at a time, on one reply subscription.
type directGets struct {
	nc    *nats.Conn
	inbox string
	sub   *nats.Subscription
}

func newDirectGets(tb testing.TB, nc *nats.Conn) *directGets {
	tb.Helper()
	d := &directGets{nc: nc, inbox: nc.NewInbox()}
	var err error
	if d.sub, err = nc.SubscribeSync(d.inbox); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { d.sub.Unsubscribe() })
	return d
}

// multiLast sends {"multi_last":[filter]} and returns the subjects of the
// messages of its answer (none when nothing matches); 413 (more than
// 1,024 subjects match) is an answer too (too many).
func (d *directGets) multiLast(filter string) (subjects []string, tooMany bool, err error) {
	if err := d.nc.PublishRequest("$JS.API.DIRECT.GET."+topology.ReadyStream, d.inbox, []byte(`{"multi_last":["`+filter+`"]}`)); err != nil {
		return nil, false, err
	}
	for {
		m, err := d.sub.NextMsg(10 * time.Second)
		if err != nil {
			return subjects, false, err
		}
		switch m.Header.Get("Status") {
		case "":
			subjects = append(subjects, m.Header.Get(jetstream.SubjectHeader))
		case "204":
			return subjects, false, nil
		case "404":
			return subjects, false, nil
		case "413":
			return subjects, true, nil
		default:
			return subjects, false, fmt.Errorf("multi_last: %s %s", m.Header.Get("Status"), m.Header.Get("Description"))
		}
	}
}
