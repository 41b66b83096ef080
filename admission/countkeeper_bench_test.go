package admission

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetgate/jetgate/admission/ojs"
	"github.com/jetgate/jetgate/jetstream/jobstore"
	"github.com/jetgate/jetgate/jetstream/natstest"
	"github.com/jetgate/jetgate/jetstream/topology"
)

// BenchmarkCountKeeperReadsRecords measures what a new count keeper pays
// before it writes (countkeeper.go): reading every record of OJS_JOBS,
// headers only. JETGATE_KEEPER_RECORDS sets the records (default 20,000;
// a tenth of them still counted, the rest finished).
//
//	JETGATE_KEEPER_RECORDS=1000000 go test -run '^$' -bench CountKeeperReadsRecords -benchtime 3x ./admission/
func BenchmarkCountKeeperReadsRecords(b *testing.B) {
	n := 20_000
	if v, err := strconv.Atoi(os.Getenv("JETGATE_KEEPER_RECORDS")); err == nil && v > 0 {
		n = v
	}
	s := natstest.RunServer(b)
	nc, js := natstest.Connect(b, s)
	assets, err := topology.Ensure(context.Background(), js, topology.Config{})
	if err != nil {
		b.Fatal(err)
	}
	svc, err := New(nc, js, assets, Config{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(svc.Stop)
	fillRecords(b, svc, n)
	k := newCountKeeper(svc, "bench")
	b.ResetTimer()
	for range b.N {
		tl := newTally(svc.heldFor())
		rctx, cancel := context.WithCancel(context.Background())
		rd, err := k.follow(rctx, tl)
		if err != nil {
			b.Fatal(err)
		}
		for !tl.caughtUp() {
			time.Sleep(time.Millisecond)
		}
		rd.stop()
		cancel()
		if got := len(tl.jobs); got != n/10 {
			b.Fatalf("keeper remembers %d jobs, want %d", got, n/10)
		}
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "records/s")
}

// fillRecords writes n job records, pipelined: one in ten scheduled, the
// rest completed.
func fillRecords(b *testing.B, svc *Service, n int) {
	b.Helper()
	var futs []jetstream.PubAckFuture
	for i := range n {
		j := &ojs.Job{SpecVersion: ojs.SpecVersion, ID: ojs.NewID(), Type: "bench.t", Queue: "q" + strconv.Itoa(i%10),
			Args: []byte(`[1,2,3]`), Priority: 2, State: ojs.StateCompleted, Internal: ojs.Internal{Token: jobstore.NewToken()}}
		if i%10 == 0 {
			j.State = ojs.StateScheduled
		}
		body, err := j.AppendJSON(nil)
		if err != nil {
			b.Fatal(err)
		}
		m := nats.NewMsg("$KV." + topology.JobsBucket + "." + j.ID)
		m.Data = body
		m.Header.Set(jobstore.HeaderStat, jobstore.StatOf(j).String())
		f, err := svc.js.PublishMsgAsync(m)
		if err != nil {
			b.Fatal(err)
		}
		futs = append(futs, f)
		if len(futs) == 4096 {
			<-svc.js.PublishAsyncComplete()
			futs = futs[:0]
		}
	}
	<-svc.js.PublishAsyncComplete()
}
