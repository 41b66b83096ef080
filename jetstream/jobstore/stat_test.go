package jobstore_test

import (
	"testing"
	"time"

	"github.com/jetgate/jetgate/admission/ojs"
	"github.com/jetgate/jetgate/jetstream/jobstore"
	"github.com/jetgate/jetgate/jetstream/topology"
)

// Issue 31 item 2: every record write carries its summary (HeaderStat),
// which is what the count keeper reads of it (headers only); a record
// written without one is summarized from its body (StatAt), and a
// deletion ends the record.
func TestRecordWritesCarryTheirSummary(t *testing.T) {
	ctx, nc, js, assets := setupStore(t)
	st := jobstore.New(nc, js, assets)
	started := ojs.NewTime(time.UnixMilli(1_790_000_000_123))
	j := &ojs.Job{SpecVersion: ojs.SpecVersion, ID: ojs.NewID(), Type: "s.t", Queue: "eu.mail", Priority: 7,
		State: ojs.StateScheduled, Internal: ojs.Internal{Token: jobstore.NewToken()}}
	rev, err := st.Create(ctx, j)
	if err != nil {
		t.Fatal(err)
	}
	// An available job's summary carries its token.
	avail := *j
	avail.State = ojs.StateAvailable
	if got, ok := jobstore.ParseStat(jobstore.StatOf(&avail).String()); !ok || got.Token != j.Internal.Token || got.State != ojs.StateAvailable {
		t.Fatalf("available summary read as %+v, %v", got, ok)
	}
	j.State, j.StartedAt, j.Internal.HeldAck = ojs.StateActive, started, "$JS.ACK.x"
	if rev, err = st.Update(ctx, j, rev); err != nil {
		t.Fatal(err)
	}
	raw, err := js.Stream(ctx, topology.KVStream(topology.JobsBucket))
	if err != nil {
		t.Fatal(err)
	}
	msg, err := raw.GetMsg(ctx, rev)
	if err != nil {
		t.Fatal(err)
	}
	got, ok := jobstore.ParseStat(msg.Header.Get(jobstore.HeaderStat))
	want := jobstore.RecordStat{State: ojs.StateActive, Priority: 7, HeldSince: started.UnixMilli(), Queue: topology.Token("eu.mail")}
	if !ok || got != want {
		t.Fatalf("header %q read as %+v (%v), want %+v", msg.Header.Get(jobstore.HeaderStat), got, ok, want)
	}
	if id, ok := jobstore.RecordID(msg.Subject); !ok || id != j.ID {
		t.Fatalf("RecordID(%q) = %q, %v", msg.Subject, id, ok)
	}
	if got, ok, err := st.StatAt(ctx, j.ID, rev); err != nil || !ok || got != want {
		t.Fatalf("StatAt: %+v %v %v, want %+v", got, ok, err, want)
	}
	// A job no longer held, or not active, says so.
	j.Internal.HeldAck = ""
	if s := jobstore.StatOf(j); s.HeldSince != 0 {
		t.Fatalf("active, not held: %+v", s)
	}
	for _, bad := range []string{"", "active", "active 2 0", "active x 0 q", "active 2 x q"} {
		if _, ok := jobstore.ParseStat(bad); ok {
			t.Fatalf("ParseStat(%q) accepted", bad)
		}
	}
	j.State = ojs.StateCompleted
	if rev, err = st.Update(ctx, j, rev); err != nil {
		t.Fatal(err)
	}
	if err := st.Delete(ctx, j.ID, rev); err != nil {
		t.Fatal(err)
	}
	last, err := raw.GetLastMsgForSubject(ctx, msg.Subject)
	if err != nil {
		t.Fatal(err)
	}
	if !jobstore.RecordGone(last.Header) {
		t.Fatalf("a deleted record's last message %v does not end it", last.Header)
	}
	if _, ok, err := st.StatAt(ctx, j.ID, last.Sequence); ok || err != nil {
		t.Fatalf("StatAt of the deletion: %v %v", ok, err)
	}
}
