package admission_test

import (
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetgate/jetgate/admission"
	"github.com/jetgate/jetgate/admission/ojs"
	"github.com/jetgate/jetgate/jetstream/jobstore"
	"github.com/jetgate/jetgate/jetstream/natstest"
	"github.com/jetgate/jetgate/jetstream/topology"
)

// A claim writes its lease timer before its compare-and-swap, on the
// job's one lease subject. A claim that then loses the compare-and-swap
// has replaced the winner's timer with its own, whose token matches no
// record. When that timer fired it was dropped as stale, and the winner's
// job stayed active with no lease: stranded, never stalled although its
// worker was silent (ojs-timeouts.md 5.5: the server MUST consider it
// stalled; DESIGN invariant 5). Under a node restart this is how a lost
// claim answer stranded jobs (issue #3): the claim's message went back
// while its write landed later, and the next claim of the message lost.
//
// Here the loser is a second instance whose cached record is the one it
// enqueued, claiming a second ready message of the job (as a put-back
// message would be) after the first instance's claim.
func TestLosingClaimLeavesWinnersLease_Timeouts55(t *testing.T) {
	t.Parallel()
	a, b := twoInstances(t, admission.Config{})
	jsA, jsB := a.js, b.js
	ctx := testCtx(t)

	j := enqueue(t, b, `{"type":"t.a","args":[],"queue":"clobber","retry":{"max_attempts":3,"initial_interval":"PT0.1S","jitter":false}}`)
	got, err := a.svc.Fetch(ctx, ojs.FetchRequest{Queues: []string{"clobber"}, WorkerID: "silent", VisibilityTimeout: time.Second})
	if err != nil || len(got) != 1 {
		t.Fatalf("first claim: %v, %d jobs", err, len(got))
	}
	winner := got[0]

	// The job's ready message once more, as enqueued: b's claim of it
	// starts from b's cached record of the enqueue and loses.
	// (Without its message id, or the stream would drop it as a duplicate.)
	dup := jobstore.ReadyMsg(j)
	dup.Header.Del(jetstream.MsgIDHeader)
	if _, err := jsB.PublishMsg(ctx, dup); err != nil {
		t.Fatal(err)
	}
	lost, err := b.svc.Fetch(ctx, ojs.FetchRequest{Queues: []string{"clobber"}, WorkerID: "late", VisibilityTimeout: time.Second})
	if err != nil || len(lost) != 0 {
		t.Fatalf("second claim of a claimed job: %v, %d jobs (want none)", err, len(lost))
	}
	timers, err := jsA.Stream(ctx, topology.TimerStream)
	if err != nil {
		t.Fatal(err)
	}
	m, err := timers.GetLastMsgForSubject(ctx, topology.TimerSchedule(topology.TimerLease, j.ID))
	if err == nil && m.Header.Get(jobstore.HeaderToken) == winner.Internal.Token {
		t.Fatalf("the losing claim wrote no lease timer: nothing is tested here")
	}

	// The silent worker's job must stall and come back for attempt 2.
	again := waitFetch(t, a, "clobber", 20*time.Second)
	if again.ID != j.ID || again.Attempt != 2 || again.Error == nil || again.Error.Type != "stalled" {
		t.Fatalf("job came back as %s attempt %d error %+v, want %s attempt 2 stalled", again.ID, again.Attempt, again.Error, j.ID)
	}
}

// The same for a retry's due timer: a nack that loses to another nack of
// the attempt (a worker's retried request reaching a second instance,
// whose cached record still says active) has written its due timer over
// the winner's. The retryable job must still come back when its backoff
// ends (ojs-retry.md; DESIGN invariant 5).
func TestLosingNackLeavesWinnersRetry(t *testing.T) {
	t.Parallel()
	a, b := twoInstances(t, admission.Config{})
	jsA := a.js
	ctx := testCtx(t)

	j := enqueue(t, a, `{"type":"t.a","args":[],"queue":"clobber-due","retry":{"max_attempts":3,"initial_interval":"PT1S","jitter":false}}`)
	got, err := a.svc.Fetch(ctx, ojs.FetchRequest{Queues: []string{"clobber-due"}, WorkerID: "w"})
	if err != nil || len(got) != 1 {
		t.Fatalf("claim: %v, %d jobs", err, len(got))
	}
	fail := ojs.NackRequest{JobID: j.ID, WorkerID: "w", Error: ojs.JobError{Type: "boom", Message: "failed"}}
	if res, err := b.svc.Nack(ctx, fail); err != nil || res.State != ojs.StateRetryable {
		t.Fatalf("nack: %v %+v", err, res)
	}
	// a still caches the active record: its nack computes a retry, writes
	// its due timer, and only then loses the compare-and-swap.
	if _, err := a.svc.Nack(ctx, fail); err == nil {
		t.Fatalf("second nack of one attempt was accepted")
	}
	timers, err := jsA.Stream(ctx, topology.TimerStream)
	if err != nil {
		t.Fatal(err)
	}
	m, err := timers.GetLastMsgForSubject(ctx, topology.TimerSchedule(topology.TimerDue, j.ID))
	if err != nil {
		t.Fatalf("due timer: %v", err)
	}
	jobs, err := jsA.KeyValue(ctx, topology.JobsBucket)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := jobs.Get(ctx, j.ID)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(rec.Value()), m.Header.Get(jobstore.HeaderToken)) {
		t.Fatalf("the losing nack's due timer did not replace the winner's: nothing is tested here")
	}

	again := waitFetch(t, a, "clobber-due", 20*time.Second)
	if again.ID != j.ID || again.Attempt != 2 {
		t.Fatalf("job came back as %s attempt %d, want %s attempt 2", again.ID, again.Attempt, j.ID)
	}
}

// A claim with a long visibility timeout holds its ready message and
// writes its lease later (lease.go). When the attempt ends in another
// process first and this process claims the job's next attempt, the first
// attempt's pending write must not ack the next attempt's held message:
// that message is the next attempt's only backstop until its own lease is
// written, and a process that died then left the job active forever.
func TestEarlierAttemptKeepsNextAttemptsBackstop(t *testing.T) {
	t.Parallel()
	// Lease deferral 2 s, retry backoff 1 s: the second claim comes while
	// the first claim's write is pending.
	cfg := admission.Config{DefaultHeartbeatTimeout: 6 * time.Second, ClaimAckWait: 6 * time.Second}
	a, b := twoInstances(t, cfg)
	jsA := a.js
	ctx := testCtx(t)

	j := enqueue(t, a, `{"type":"t.a","args":[],"queue":"backstop","retry":{"max_attempts":5,"initial_interval":"PT1S","jitter":false}}`)
	first := fetch1(t, a, "backstop")
	if first == nil || first.Internal.HeldAck == "" {
		t.Fatalf("claim should hold its message: %+v", first)
	}
	begin := time.Now()
	if _, err := b.svc.Nack(ctx, ojs.NackRequest{JobID: j.ID, Error: ojs.JobError{Type: "boom", Message: "failed"}}); err != nil {
		t.Fatal(err)
	}
	second := waitFetch(t, a, "backstop", 10*time.Second)
	if second.ID != j.ID || second.Attempt != 2 || second.Internal.HeldAck == "" {
		t.Fatalf("second claim: %+v", second)
	}
	if time.Since(begin) > 1900*time.Millisecond {
		t.Skipf("the machine is too slow: the second claim came %s after the first", time.Since(begin))
	}
	// Past the first claim's deferred write, before the second's.
	time.Sleep(2500*time.Millisecond - time.Since(begin))
	cons, err := jsA.Consumer(ctx, topology.ReadyStream, topology.ReadyConsumer("backstop", 2))
	if err != nil {
		t.Fatal(err)
	}
	info, err := cons.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.NumAckPending != 1 && leaseTimer(t, jsA, j.ID) == second.Internal.Token {
		t.Skip("the machine is too slow: the second claim's own lease write came first")
	}
	if info.NumAckPending != 1 {
		t.Errorf("the second attempt's held message was acked by the first attempt's lease write (ack pending %d)", info.NumAckPending)
	}
	a.svc.Kill() // dies before the second attempt's lease write
	back := waitFetch(t, b, "backstop", 30*time.Second)
	if back.ID != j.ID || back.Attempt != 3 || back.Error == nil || back.Error.Type != "stalled" {
		t.Fatalf("job of the dead process came back as %s attempt %d error %+v", back.ID, back.Attempt, back.Error)
	}
}

// twoInstances starts two jetgate instances with cfg on one server, each
// on its own connection.
func twoInstances(t *testing.T, cfg admission.Config) (a, b bundle) {
	t.Helper()
	s := natstest.RunServer(t)
	_, jsA := natstest.Connect(t, s)
	_, jsB := natstest.Connect(t, s)
	return setupCfg(t, jsA, cfg), setupCfg(t, jsB, cfg)
}
