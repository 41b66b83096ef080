// Package jobstore owns job records and the messages that act on them.
//
// A job record lives in the KV bucket OJS_JOBS under the job id; every
// change is a compare-and-swap on the record's revision (Update), so two
// racing transitions have exactly one winner. A job enqueued as available
// has no record until it leaves available: its ready message is the job
// (a seed, seed.go), and the transition that takes it out creates the
// record (a compare-and-swap on an empty subject).
//
// Work that must happen later is a message: a ready message on
// ojs.ready.<queue>.<priority>.<id> says "this job may run", a timer (a JetStream
// message schedule on ojs.timer.<kind>.<job>) says "look at this job at that
// time". Each such message carries the record's Token of the transition it
// belongs to, and is published BEFORE the compare-and-swap that makes it
// valid. A crash between the two leaves only a message whose token matches
// no record, which its consumer drops; it can never leave a record without
// its message. That ordering is the whole crash-safety argument, so callers
// must keep it: new token, publish, then CAS.
//
// jobstore never decides anything (that is admission's job) and never knows
// about HTTP.
//
// # Finding an available job without a record (issue 17)
//
// Issue 17 makes a job's first write its only enqueue write: the ready
// message carries the whole job, and the record in OJS_JOBS is written
// first when the job leaves available (claim, cancel, PATCH...). GET of an
// available job must then find it in the ready stream. The chosen scheme,
// measured below (built: seed.go, and "The layout change, worked out"):
//
//   - Ready subjects end with the job id: ojs.ready.<queue>.<priority>.<id>
//     (each token through topology.Token, so an id holding '.', '*' or '>'
//     cannot widen a lookup). Level consumers filter
//     ojs.ready.<queue>.<priority>.>.
//   - A job without a record is found by the last message on
//     ojs.ready.*.*.<id>. On a single server that is one batched direct get,
//     {"multi_last":["ojs.ready.*.*.<id>"]} (ADR-31): the server matches the
//     subject in its subject tree and reads the match by exact subject.
//     Where direct gets are off (replicas, topology.Ensure), it is a
//     JetStream message get, {"last_by_subj":"ojs.ready.*.*.<id>"},
//     answered by the stream leader, so it sees every acknowledged publish;
//     multi_last has no leader form.
//   - GET reads the record first, then the ready stream, then the record
//     again: a claim creates the record before it acks the ready message,
//     so a job claimed between the first two reads is found by the third.
//     The record, when there is one, is the truth; a ready message beside
//     it (claim in flight, a retry made ready again) is only a token. "Not
//     found" costs the three round trips (about 100-120 µs on one server).
//   - A ready message acked by a worker (work-queue retention) or removed by
//     sequence (cancel, discard) is gone at once: the lookup answers not
//     found (TestReadyLookupByID), which is why the record must exist first.
//
// Alternatives: a record written at enqueue (today) is the stored write
// the issue removes; any other index by id (a KV key, a second stream) is
// one too, and NATS keeps no readable index of message ids (the
// Nats-Msg-Id table is internal and lasts the duplicate window only).
// Putting the id first (ojs.ready.<id>.<queue>.<priority>) would make the
// lookup an exact prefix but every level consumer a wildcard filter over
// all jobs; not pursued.
//
// Measured on the 2-core development VM (AMD EPYC, go1.26.8, file storage,
// one server, 200-byte messages on 10 queues × 3 levels, p50 µs of one
// caller, ranges over runs; 2026-11-25):
//
//	JETGATE_LOOKUP_N=100000 go test -run '^$' -bench 'ReadyLookup$' -benchtime 1s ./jetstream/jobstore/
//	JETGATE_LOOKUP_N=1000000 go test -run '^$' -bench 'ReadyLookup$' -benchtime 1s ./jetstream/jobstore/
//
//	lookup of a job by id                   100k msgs           1M msgs
//	direct multi_last ojs.ready.*.*.<id>    45 (16.8k/s)        74 (12.2k/s)
//	direct last_by_subj ojs.ready.*.*.<id>  57-88 (10.7-13.7k/s) 90 (10.5k/s)
//	direct last_by_subj exact subject       36-46               37
//	leader last_by_subj ojs.ready.*.*.<id>  72-114 (8.4-11.4k/s) 126 (7.2k/s)
//	leader last_by_subj exact subject       55-82               66
//	not found: multi_last / direct / leader 28 / 31 / 50         29 / 31 / 52
//	KV Get of a record, direct (today)      37-38 (14.6-18k/s)  39
//	KV Get of a record, leader (replicas)   56-75               101
//
// On a 3-node cluster in one process (R3, direct gets off as Ensure sets
// them, the client on any node; JETGATE_LOOKUP_N=100000 go test -bench
// ReadyLookupR3), p50 µs: leader last_by_subj ojs.ready.*.*.<id> 125
// (6.3k/s), exact subject 102, not found 97, KV Get of a record 107.
//
// The lookup does not grow with the number of jobs but with the number of
// queue × priority levels holding messages: the wildcards walk every level
// of the subject tree, and a found subject is matched again in its message
// block's index (100,000 messages; JETGATE_LOOKUP_LEVELS=<q>x<p> go test
// -bench ReadyLookupManyLevels):
//
//	levels in use          30      100     1,000     10,240
//	direct multi_last      45      -       264       2,069
//	direct last_by_subj    57-88   129     358-480   3,777-4,711
//	leader last_by_subj    72-114  132     590-613   3,353-3,840
//	not found (direct)     31      33      53-55     317
//	exact subject          36-46   38      38-44     38-40
//
// So with a few dozen levels a GET without a record costs what a KV Get
// costs; with thousands of levels it costs milliseconds (GET is not on the
// fetch/ack path). A process can keep a cache of id -> (queue, priority)
// for the jobs it enqueued and read the exact subject (38 µs whatever the
// levels), falling back to the wildcard; it is only a cache.
//
// What per-job subjects cost the rest (JETGATE_LOOKUP_N=100000 and 1000000
// go test -run '^$' -bench ReadyLayout -benchtime 1s, same machine):
//
//	                                 per-level (today)    per-job
//	async publish, 1,000 in flight   126-182k/s           83-136k/s
//	Fetch(10) + ack per message      55-77k/s             42-67k/s
//	Fetch(1) + ack (deep backlog,    1.7-2.2k/s (one run  2.9-3.2k/s
//	  removal bound, DESIGN "Speed")   of 10k/s)
//	level lookup: stream info with   74-103 µs            15-41 ms (100k),
//	  subjects filter (levels.go)                         195 ms (1M)
//	level lookup: multi_last         35-38 µs             1.5-10.7 ms (100k),
//	  (ReadyLevels)                                       51 ms (1M); 413 past
//	                                                      1,024 jobs per queue
//	level lookup: last_by_subj       -                    0.6-2.9 ms (100k),
//	  ojs.ready.q.<p>.* per level ×3                      16 ms (1M)
//	consumer info of the 3 level     237-342 µs           242-328 µs (100k),
//	  consumers (num_pending)                             458 µs (1M)
//	creating the 3 level consumers   3.3 ms               34 ms
//	  of q0 (100k of its jobs, 1M)
//	live heap per stored message     5-52 B               188-236 B
//
// Publishing and fetching cost little more (the server inserts one
// subject per message into its subject tree and block indexes: a few µs
// of server CPU per job, against ~350 µs a job costs jetgate today), and
// the server holds ~185 B of memory per ready job (185 MB for a backlog of
// a million). But every lookup that matches subjects of a queue now walks
// its jobs, so ReadyLevels's multi_last and stream info are gone: levels
// come from a registry and the level consumers, whose num_pending the
// server keeps as messages come and go (one consumer info, ~100 µs, per
// level, flat in the number of jobs); see "Levels without walking jobs"
// below for what was built and measured.
// Creating a level consumer walks the level's subjects to count them, ten
// times slower with per-job subjects (34 ms for 100k jobs): jetgate
// creates them on demand and drops them after an hour idle, so a deep
// level pays it again after a quiet hour. The benchmarks run client and
// server in one process, so a server holding a million subjects also slows
// the client through GC (the 1M consumer info above).
//
// Upgrades: ready messages of the old layout (ojs.ready.<queue>.<priority>)
// all have records, so lookups need nothing for them, but a level consumer
// filtering only ojs.ready.<queue>.<priority>.> would never deliver them:
// until they are drained a level consumer needs both filters
// (FilterSubjects).
//
// # The layout change, worked out (issue 17, built)
//
// What the change must get right besides the lookup above, found while
// working it out against the code (session 8). Each point is a decision
// for the implementation, with the reason; each is built (session 10),
// and says what was built where it differs from the plan. The confirmed
// completion ack is the one point left out.
//
//   - One fence (built, seed.go). A job without a record is "seeded" from
//     its ready message (the body is the whole job, Internal included:
//     token, depth unit, limits, and Origin, the token it was enqueued
//     with) at its base revision, 0 unless the enqueue met a deletion
//     marker, and the transition writes the record expecting that last
//     subject sequence: create-if-absent. It is admission's transition:
//     Store.Get falls back from the record to the ready stream (record,
//     ready stream, record again), a claim takes the job from the message
//     it holds without reading (transitionFrom, decoded only when the
//     record cache does not know the job), and a write at the seed's
//     revision is the create. Claim, cancel, PATCH, expiry, drop, aging
//     and a parked waiter (materialize: its promotion publishes a message
//     without the job) go through it; whoever writes first wins, and
//     every other ready message of the job is stale by its token.
//   - Deleted is not absent (built). A record deleted by an operator, or
//     removed when its retention TTL ended (the server's limit marker,
//     kept 1 h), leaves a marker that a ready message older than it never
//     seeds over: readRecord tells a marker from an empty subject, and a
//     seed is taken only over nothing or the marker it names. A new job of
//     the id names the marker (PublishSeed reads the record after its
//     publish and sends the seed again, naming it), and a seed that can
//     never be taken is removed when a new job of its id meets it.
//     A record created and refused again (below) leaves a marker that
//     says so (Ojs-Refused) and hides no seed.
//   - Duplicate ids stay 409 (built). Clients send their own ids (the
//     official SDKs do), cron relies on a duplicate id to make one enqueue
//     per tick across processes, and workflows on it to enqueue a step
//     once. The seed of a client-named id is published with
//     Nats-Expected-Last-Subject-Sequence 0 checked on ojs.ready.*.*.<id>
//     (Nats-Expected-Last-Subject-Sequence-Subject, wildcards accepted),
//     then the record is read: a record written from this very seed
//     (Internal.Origin) is the job claimed meanwhile; any other means the
//     id is taken (409; the new message is removed). A server-made id
//     (UUIDv7 from NewID) skips both. Seeds carry no Nats-Msg-Id (one
//     duplicate-window entry fewer per job on the server; a retry after a
//     lost answer meets the first seed as another message of the id). An
//     enqueue that starts with a record (scheduled, pending, a bounded
//     queue's job) looks for a seed of the id before and after creating
//     the record (SeedTaken, CheckNoSeed) and publishes its ready message,
//     if any, with the same expectation (PublishReadyNamed); two enqueues
//     racing across the two paths see each other at least once, so at
//     worst both answer 409 and neither job exists: safe, and a retry
//     settles it.
//   - Finished records expire; ready messages must not outlive them. The
//     held ready message of a claimed job is acknowledged when the job
//     finishes (AckHeld, a plain publish). A lost ack brings the message
//     back at the level's next fetch after ClaimAckWait (30 s), where the
//     record makes it stale; a crash between the record write and the ack
//     likewise. Only if nothing fetches the level until the record's
//     retention (24 h) and the 1 h its marker is kept are over would the
//     message seed the job again. Not built: confirming the ack
//     (AckSync, retried) would close that window at one round trip per
//     completion.
//   - Levels without walking jobs (built). Per-job subjects make every
//     lookup that matches a queue's subjects walk its jobs (ReadyLevels's
//     multi_last and stream info, recheckLevel and ReadyArrivals's
//     next-by-subject, drop_oldest's and aging's oldest message). The
//     levels a queue has used are registered in its record in OJS_QUEUES
//     ("levels":[0,3], registry.go; not in the QueueInfo the API
//     returns): every ready publish (PublishReady, PublishReadyBatch,
//     Promote) first makes sure its level is there, with one
//     compare-and-swap when it is not (once per queue and level in the
//     cluster: each process remembers the levels it registered, and
//     admission's watch of the bucket feeds it the others'). At start,
//     one stream info filtered on ojs.ready.*.* (the old layout's level
//     subjects, one entry per level) registers the levels still holding
//     old messages. A fetch (admission/levels.go) pulls a queue with one
//     registered level directly; otherwise it asks the registered levels'
//     consumers for their info in parallel and pulls, in waves, the
//     levels whose num_pending + num_ack_pending is above zero (put-back
//     messages are ack-pending). A queue with more than 16 levels reads
//     all its consumers' counts from one page of the stream's consumer
//     list ($JS.API.CONSUMER.LIST, sorted by name, up to 256 infos: 4.5-
//     5.8 ms for 256 levels against 17-19 ms for as many consumer infos)
//     and reuses them for 10 ms or 16 pulls (admission/levelpull.go).
//     Aging reads a level's head after its consumer's delivered sequence,
//     drop_oldest a level from its consumer's ack floor: reads that stop
//     at the first match. Measured (go test -run '^$' -bench
//     PriorityLevels -benchtime 1x -bench.jobs 5000 ./bench, 2-core VM,
//     three quiet runs each, interleaved), jobs/s before and after:
//     draining 1 level 5.2-5.4k, now 9.2-9.8k; 10 levels 4.8-5.3k, now
//     6.1-6.4k; 256 levels 4.3-4.7k, now 4.8-5.1k. Round trip 1 level
//     4.2-5.8k, now 6.3-6.5k; 10 levels 2.1-3.1k, now 4.7-4.9k; 256
//     levels 3.1-3.2k, now 2.9-3.0k. The windows: a level used for the
//     first time is seen by other processes when their watch delivers the
//     record (milliseconds), or at once by a fetch that finds nothing at
//     the levels it knows (it reads the record then), and a queue with
//     more than 16 levels sees a job that another process enqueued at a
//     level its reused counts show empty after 10 ms at most; a job
//     enqueued through the same process is always seen. An older process
//     that rewrites a queue record (pause, aging) drops its levels;
//     processes that knew them keep them.
//   - No recheck against the stream (built). A consumer's pending count is
//     updated asynchronously after a publish (admission/levels.go), and
//     an empty no-wait pull used to be confirmed by reading the level's
//     next message by subject. With per-job subjects that read is a
//     wildcard next-by-subject: nats-server's filestore (LoadNextMsg,
//     2.15.2) then skips the per-subject index once it holds 64k subjects
//     and matches every block's subjects from the start sequence to the
//     end of the stream, all queues' messages included. Instead the store
//     notes, per level, the highest stream sequence of its own ready
//     publishes (from the publish acks). An empty no-wait pull on a level
//     this process published to after the last message it was handed
//     there asks the consumer's info; if the consumer has not delivered
//     past that publish, one pull waits for it (20 ms at most, answered
//     as soon as the count catches up), and the publish then counts as
//     seen. TestFetchNeverSkipsAReadyLevel_PRI004 fails within a few
//     hundred rounds without the wait and passes with it. Between
//     processes the lag cannot be told from a publish that came a moment
//     later: a producer's 201 reaches its client and the client's next
//     fetch reaches another process only after a round trip
//     (TestFetchAcrossProcessesPutsBackInOrder_PRI003,
//     TestLevelFirstUsedByOtherProcessFetchedInOrder_PRI003).
//   - Level consumers filter ojs.ready.<queue>.<priority>.> and, until the
//     old layout is drained, ojs.ready.<queue>.<priority> (FilterSubjects).
//   - Batches (built, PublishSeedBatch). Measured first
//     (BenchmarkBatchAllOrNothing, 100 jobs of 700 B on per-job
//     subjects, file storage, 2-core VM under heavy load from other work,
//     2026-11-25): an atomic batch of 100 took 28.6 ms (3.5k jobs/s); the
//     same 100 messages published pipelined and awaited, then one commit
//     marker stored, 3.5 ms (28.2k jobs/s). Where the atomic batch's time
//     goes: on file storage nats-server stages every message of a batch
//     in a file store of its own before the commit (stream.go, "persist
//     everything to survive hard kills"): a directory, files, an fsync
//     and their removal per batch, the mkdir/openat/fsync/unlinkat in the
//     drain-http CPU profile. Built, in two forms:
//   - A batch whose ids the server made (what the official SDKs send) is
//     its seeds under a pending marker (batchmark.go): a marker created in
//     OJS_BATCHES (awaited), the seeds published pipelined naming the
//     batch (header Ojs-Batch), the commit a compare-and-swap purge of the
//     marker. A seed whose batch is pending or aborted is no job to a claim
//     or a GET; a batch pending longer than BatchWindow (30 s) is abandoned
//     by the reader that meets it (compare-and-swap to aborted, which a
//     late commit then loses), and aborted seeds are dropped. The marker
//     lives only while the batch is pending (a committed batch is the
//     marker's absence), so nothing has to outlive the batch's jobs; each
//     process reads a batch's marker once (committed batches are
//     remembered). Cost: one stored write per job plus two per batch, three
//     round trips per batch. A failed batch leaves its aborted marker (a
//     few bytes) for good: its leftover seeds may sit in a level nobody
//     fetches, and the marker is what keeps them from being jobs.
//   - A batch naming ids is one atomic batch of seeds on OJS_READY
//     (AllowAtomicPublish on): all or none by the server, one stored
//     write per job. Client-named ids expect no other ready message of the
//     id inside the batch, and their record subjects are read in one
//     batched get once it landed.
//     Batches with a scheduled or pending job keep records from the start.
//
// Operators with the nats CLI see one subject per available job: nats
// stream info OJS_READY counts them (subjects = ready jobs), nats stream
// subjects OJS_READY lists every one of them (use a filter on a large
// backlog), and nats stream get OJS_READY --last-for 'ojs.ready.*.*.<id>'
// shows an available job's message, the whole job.
package jobstore
