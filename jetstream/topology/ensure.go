package topology

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Config shapes the JetStream assets.
type Config struct {
	// Replicas of every stream and bucket: 1 on a single server, 3 on a
	// 3-node cluster.
	Replicas int
	// Storage is file storage unless set to memory (tests, benchmarks).
	Storage jetstream.StorageType
	// DuplicateWindow bounds the deduplication of ready messages.
	DuplicateWindow time.Duration
	// RecordMarkers is how long the marker a finished job's record leaves
	// when its retention ends is kept (default and at most DefaultRecordMarkers).
	// The marker is what keeps a leftover ready message of the finished
	// job (its acknowledgement lost, its level not fetched since) from
	// taking the job up again, so the fence lasts the retention plus this;
	// each marker costs the server ~230 B of memory while it lives, so a
	// short retention, chosen to bound that memory, wants short markers
	// too: jetgate serve passes min(1 h, --retention).
	RecordMarkers time.Duration
}

// DefaultRecordMarkers is Config.RecordMarkers' default and cap.
const DefaultRecordMarkers = time.Hour

func (c Config) withDefaults() Config {
	c.Replicas = cmp.Or(c.Replicas, 1)
	c.DuplicateWindow = cmp.Or(c.DuplicateWindow, 2*time.Minute)
	if c.RecordMarkers <= 0 || c.RecordMarkers > DefaultRecordMarkers {
		c.RecordMarkers = DefaultRecordMarkers
	}
	return c
}

// MaxReadyConsumers is the ready stream's consumer limit: each queue and
// priority level in use has a consumer (removed after an hour unused), so
// 256 levels of 40 queues need 10,240.
const MaxReadyConsumers = 1_000_000

// Assets are the handles jetgate works with once Ensure has run.
type Assets struct {
	Jobs   jetstream.KeyValue
	Queues jetstream.KeyValue
	Dead   jetstream.KeyValue
	Limits jetstream.KeyValue
	Groups jetstream.KeyValue
	Ready  jetstream.Stream
	Wait   jetstream.Stream
	Timers jetstream.Stream
	Counts jetstream.Stream
	Stats  jetstream.Stream

	// Workers is the worker registry (WorkersBucket).
	Workers jetstream.KeyValue
	// Unique holds unique job keys (UniqueBucket).
	Unique jetstream.KeyValue
	// Batches holds the markers of batches being stored (BatchesBucket).
	Batches jetstream.KeyValue
	// Leases holds the leases of roles (LeasesBucket).
	Leases jetstream.KeyValue
	// Cron holds the cron job definitions (CronBucket) and CronTicks
	// their tick schedules (CronStream), both owned by admission/cron.
	Cron      jetstream.KeyValue
	CronTicks jetstream.Stream
	// Workflows holds workflow records (WorkflowsBucket).
	Workflows jetstream.KeyValue
	// WorkflowTimers holds the workflows' check timers (WorkflowTimerStream).
	WorkflowTimers jetstream.Stream
}

// Ensure creates or updates every bucket and stream jetgate needs. It is
// idempotent and safe to run from many processes at once.
//
// A cluster still forming (a node whose state the meta leader has not
// heard yet counts as offline) refuses to place a replicated stream for a
// moment ("no suitable peers for placement"): Ensure tries again then, for
// up to placementWait.
func Ensure(ctx context.Context, js jetstream.JetStream, cfg Config) (*Assets, error) {
	deadline := time.Now().Add(placementWait)
	for wait := 100 * time.Millisecond; ; wait = min(2*wait, time.Second) {
		a, err := ensure(ctx, js, cfg)
		var apiErr *jetstream.APIError
		if err == nil || !errors.As(err, &apiErr) || apiErr.ErrorCode != errCodeNoPeers || time.Now().Add(wait).After(deadline) {
			return a, err
		}
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return nil, err
		}
	}
}

// errCodeNoPeers is JetStream's "no suitable peers for placement"
// (JSClusterNoPeersErrF), which nats.go does not name.
const errCodeNoPeers jetstream.ErrorCode = 10005

// placementWait bounds Ensure's retries while a cluster forms.
const placementWait = 15 * time.Second

func ensure(ctx context.Context, js jetstream.JetStream, cfg Config) (*Assets, error) {
	cfg = cfg.withDefaults()
	var a Assets
	var err error
	kv := func(name, desc string, dst *jetstream.KeyValue) {
		if err != nil {
			return
		}
		var markers time.Duration
		if name == JobsBucket {
			// Finished job records carry a per-message TTL (retention);
			// the marker left when one expires is kept this long.
			markers = cfg.RecordMarkers
		}
		if name == BatchesBucket {
			// A batch's commit purges its marker; the purge's own marker
			// expires (per-message TTL).
			markers = time.Minute
		}
		if name == UniqueBucket || name == WorkflowsBucket {
			// Unique keys with a period expire with it, finished workflow
			// records after their retention (per-message TTL).
			markers = time.Minute
		}
		var ttl time.Duration
		if name == WorkersBucket {
			// Dead workers vanish; their expiry leaves a marker so that
			// watchers drop them too.
			ttl, markers = WorkersTTL, time.Minute
		}
		if name == LeasesBucket {
			// A role's lease lapses when its holder stops renewing it.
			ttl = LeaseTTL
		}
		*dst, err = js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
			Bucket:         name,
			Description:    desc,
			History:        1,
			Storage:        cfg.Storage,
			Replicas:       cfg.Replicas,
			LimitMarkerTTL: markers,
			TTL:            ttl,
		})
		if err != nil {
			err = fmt.Errorf("ensure bucket %s: %w", name, err)
		}
	}
	kv(JobsBucket, "jetgate job records, key = job id", &a.Jobs)
	kv(QueuesBucket, "jetgate queue config, key = escaped queue name", &a.Queues)
	kv(DeadBucket, "jetgate dead letter index, key = queue.job id", &a.Dead)
	kv(LimitsBucket, "jetgate rate limit state, key = escaped limit key", &a.Limits)
	kv(GroupsBucket, "jetgate worker group defaults, key = escaped group name", &a.Groups)
	kv(WorkersBucket, "jetgate worker registry, key = escaped worker id", &a.Workers)
	kv(UniqueBucket, "jetgate unique job keys, key = escaped uniqueness key", &a.Unique)
	kv(CronBucket, "jetgate cron job definitions, key = escaped cron name", &a.Cron)
	kv(WorkflowsBucket, "jetgate workflow records, key = workflow id", &a.Workflows)
	kv(BatchesBucket, "jetgate markers of job batches being stored, key = b.<batch id>", &a.Batches)
	kv(LeasesBucket, "jetgate leases of roles one process plays at a time, key = role", &a.Leases)
	if err != nil {
		return nil, err
	}
	if err := allowAtomic(ctx, js, "KV_"+JobsBucket); err != nil {
		return nil, err
	}
	if cfg.Replicas > 1 {
		// Direct gets may be answered by a follower that has not applied
		// the latest write yet. Every read of a record feeds a decision,
		// so on a cluster reads go through the stream leader.
		for _, b := range []struct {
			name string
			dst  *jetstream.KeyValue
		}{{JobsBucket, &a.Jobs}, {QueuesBucket, &a.Queues}, {DeadBucket, &a.Dead}, {LimitsBucket, &a.Limits}, {GroupsBucket, &a.Groups}, {WorkersBucket, &a.Workers}, {UniqueBucket, &a.Unique}, {CronBucket, &a.Cron}, {WorkflowsBucket, &a.Workflows}, {BatchesBucket, &a.Batches}, {LeasesBucket, &a.Leases}} {
			if *b.dst, err = leaderReads(ctx, js, b.name); err != nil {
				return nil, err
			}
		}
	}
	readyCfg := jetstream.StreamConfig{
		Name:        ReadyStream,
		Description: "jetgate ready jobs: one message per job ready to run, ojs.ready.<queue>.<priority>.<job id>",
		Subjects:    []string{ReadySubjects},
		Retention:   jetstream.WorkQueuePolicy,
		Storage:     cfg.Storage,
		Replicas:    cfg.Replicas,
		Duplicates:  cfg.DuplicateWindow,
		// Lookups by subject (a job's ready message by its id) use
		// direct gets, batched or not. Direct gets must see the latest
		// ready messages; on a cluster they would also be answered by
		// followers, so they stay off there.
		AllowDirect: cfg.Replicas <= 1,
		// One consumer per queue and priority level in use (for an hour
		// after its last use): far more than nats-server's default of
		// 1,000 consumers per stream can be in use at once.
		MaxConsumers: MaxReadyConsumers,
		// A batch of new available jobs is stored as their ready messages
		// alone, all or none (jobstore.PublishSeedBatch).
		AllowAtomicPublish: true,
	}
	a.Ready, err = js.CreateOrUpdateStream(ctx, readyCfg)
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeMaximumConsumersLimit {
		// The account allows fewer consumers per stream: its limit holds.
		readyCfg.MaxConsumers = 0
		a.Ready, err = js.CreateOrUpdateStream(ctx, readyCfg)
	}
	if err != nil {
		return nil, fmt.Errorf("ensure stream %s: %w", ReadyStream, err)
	}
	a.Wait, err = js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name:        WaitStream,
		Description: "jetgate jobs waiting on a rate limit, ojs.wait.<limit entry>.<priority>, oldest first",
		Subjects:    []string{WaitSubjects},
		// Limits retention: waiters are read in place (direct get by
		// subject) and deleted by sequence when released; no consumer.
		Retention: jetstream.LimitsPolicy,
		Storage:   cfg.Storage,
		Replicas:  cfg.Replicas,
		// Direct gets must see the latest waiters; on a cluster they go
		// through the leader (AllowDirect off).
		AllowDirect: cfg.Replicas <= 1,
	})
	if err != nil {
		return nil, fmt.Errorf("ensure stream %s: %w", WaitStream, err)
	}
	// Timer streams: message schedules firing to a subject that one
	// durable consumer, shared by every process, filters. WorkQueue: a
	// fired message is gone once handled; the schedules themselves are
	// never consumed. Per-message TTL and rollup serve cancel markers.
	timerStream := func(dst *jetstream.Stream, name, desc string, subjects ...string) error {
		st, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
			Name:              name,
			Description:       desc,
			Subjects:          subjects,
			Retention:         jetstream.WorkQueuePolicy,
			Storage:           cfg.Storage,
			Replicas:          cfg.Replicas,
			AllowMsgSchedules: true,
			AllowMsgTTL:       true,
			AllowRollup:       true,
		})
		if err != nil {
			return fmt.Errorf("ensure stream %s: %w", name, err)
		}
		*dst = st
		return nil
	}
	if err := timerStream(&a.Timers, TimerStream,
		"jetgate timers: message schedules (ojs.timer.<kind>.<job>) firing to ojs.fired.<kind>",
		TimerScheduleSubjects, TimerFiredSubjects, TimerCancelSubject); err != nil {
		return nil, err
	}
	if err := timerStream(&a.CronTicks, CronStream,
		"jetgate cron ticks: one message schedule per cron job (ojs.cron.tick.<name>.<gen>) firing to ojs.cron.fired",
		CronSubjects); err != nil {
		return nil, err
	}
	if err := timerStream(&a.WorkflowTimers, WorkflowTimerStream,
		"jetgate workflow check timers: message schedules (ojs.wftimer.<workflow>) firing to ojs.wffired",
		WorkflowTimerSubjects, WorkflowFiredSubject); err != nil {
		return nil, err
	}
	a.Counts, err = js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name:              CountStream,
		Description:       "jetgate job counters per queue and state (counter CRDTs)",
		Subjects:          []string{CountSubjects},
		Storage:           cfg.Storage,
		Replicas:          cfg.Replicas,
		AllowMsgCounter:   true,
		AllowDirect:       true,
		MaxMsgsPerSubject: 1,
	})
	if err != nil {
		return nil, fmt.Errorf("ensure stream %s: %w", CountStream, err)
	}
	a.Stats, err = js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name:        StatStream,
		Description: "jetgate per-queue activity samples of the last hour",
		Subjects:    []string{StatSubjects},
		Storage:     cfg.Storage,
		Replicas:    cfg.Replicas,
		MaxAge:      StatWindow,
		AllowDirect: true,
	})
	if err != nil {
		return nil, fmt.Errorf("ensure stream %s: %w", StatStream, err)
	}
	return &a, nil
}

// leaderReads turns off direct gets on a bucket and binds it again, so
// every Get is answered by the stream leader (read-after-write).
func leaderReads(ctx context.Context, js jetstream.JetStream, bucket string) (jetstream.KeyValue, error) {
	s, err := js.Stream(ctx, "KV_"+bucket)
	if err != nil {
		return nil, fmt.Errorf("look up bucket %s: %w", bucket, err)
	}
	cfg := s.CachedInfo().Config
	if cfg.AllowDirect {
		cfg.AllowDirect = false
		if _, err := js.UpdateStream(ctx, cfg); err != nil {
			return nil, fmt.Errorf("leader reads on %s: %w", bucket, err)
		}
	}
	kv, err := js.KeyValue(ctx, bucket)
	if err != nil {
		return nil, fmt.Errorf("bind bucket %s: %w", bucket, err)
	}
	return kv, nil
}

// allowAtomic turns on atomic batch publishing on a bucket's stream, so a
// batch of job records can be created all-or-nothing.
func allowAtomic(ctx context.Context, js jetstream.JetStream, stream string) error {
	s, err := js.Stream(ctx, stream)
	if err != nil {
		return fmt.Errorf("look up stream %s: %w", stream, err)
	}
	cfg := s.CachedInfo().Config
	if cfg.AllowAtomicPublish {
		return nil
	}
	cfg.AllowAtomicPublish = true
	if _, err := js.UpdateStream(ctx, cfg); err != nil {
		return fmt.Errorf("allow atomic publish on %s: %w", stream, err)
	}
	return nil
}
