package jobstore

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetgate/jetgate/admission/ojs"
)

// pubAckByJSON is how jetstream.PublishMsg reads an answer (nats.go
// v1.55.0, jetstream/publish.go: publishMsg and pubAckResponse): the
// reference readPubAck must agree with.
func pubAckByJSON(b []byte) (uint64, error) {
	var r struct {
		Type  string              `json:"type"`
		Error *jetstream.APIError `json:"error,omitempty"`
		*jetstream.PubAck
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return 0, jetstream.ErrInvalidJSAck
	}
	if r.Error != nil {
		return 0, r.Error
	}
	if r.PubAck == nil || r.Stream == "" {
		return 0, jetstream.ErrInvalidJSAck
	}
	return r.Sequence, nil
}

func checkPubAck(t *testing.T, b []byte) {
	t.Helper()
	seq, err := readPubAck(b)
	wantSeq, wantErr := pubAckByJSON(b)
	var api, wantAPI *jetstream.APIError
	switch {
	case wantErr == nil:
		if err != nil || seq != wantSeq {
			t.Errorf("%s: got %d, %v; want %d", b, seq, err, wantSeq)
		}
	case errors.As(wantErr, &wantAPI):
		if !errors.As(err, &api) || *api != *wantAPI {
			t.Errorf("%s: got %d, %v; want %v", b, seq, err, wantErr)
		}
	case !errors.Is(err, wantErr):
		t.Errorf("%s: got %d, %v; want %v", b, seq, err, wantErr)
	}
}

// readPubAck reads every answer as encoding/json does: nats-server's
// usual answers, with a domain, duplicates, errors, and malformed ones.
func TestReadPubAck(t *testing.T) {
	for _, s := range []string{
		`{"stream":"KV_OJS_JOBS","seq":1}`,
		`{"stream":"KV_OJS_JOBS","seq":18446744073709551615}`,
		`{"stream":"KV_OJS_JOBS","seq":18446744073709551616}`,
		`{"stream":"S","seq":0}`,
		`{"stream":"S","domain":"hub","seq":42}`,
		`{"stream":"S","seq":42,"duplicate":true}`,
		`{"stream":"S","seq":0,"error":{"code":400,"err_code":10071,"description":"wrong last sequence: 7"}}`,
		`{"error":{"code":503,"err_code":10077,"description":"maximum messages exceeded"}}`,
		`{"stream":"","seq":3}`,
		`{"stream":"a\"b","seq":3}`,
		`{"stream":"S","seq":}`,
		`{"stream":"S","seq":4`,
		`{"stream":"S","seq":-4}`,
		`{"stream":"S","seq":4}x`,
		`{"stream":"S", "seq": 22}`,
		``,
		`+OK`,
	} {
		checkPubAck(t, []byte(s))
	}
}

func FuzzReadPubAck(f *testing.F) {
	f.Add([]byte(`{"stream":"S","seq":42}`))
	f.Add([]byte(`{"stream":"S","domain":"d","seq":42}`))
	f.Add([]byte(`{"stream":"S","seq":0,"error":{"code":400,"err_code":10071,"description":"x"}}`))
	f.Fuzz(func(t *testing.T, b []byte) { checkPubAck(t, b) })
}

// Against a real server: a record write answers the revision the bucket
// stored, and a write at a stale revision is the conflict the claim's
// fence relies on (wrongLastSeq), with nothing written.
func TestRecordWriteRevisions(t *testing.T) {
	ctx, st := testStore(t)
	assets := st.assets
	rev, err := st.publish(ctx, recordMsg(&ojs.Job{ID: "job-1"}, []byte(`{"a":1}`), 0, 0))
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	e, err := assets.Jobs.Get(ctx, "job-1")
	if err != nil || e.Revision() != rev {
		t.Fatalf("stored revision %v (%v), answered %d", e, err, rev)
	}
	if _, err := st.publish(ctx, recordMsg(&ojs.Job{ID: "job-1"}, []byte(`{"a":2}`), 0, 0)); !wrongLastSeq(err) {
		t.Fatalf("second create: %v, want a wrong last sequence", err)
	}
	if _, err := st.publish(ctx, recordMsg(&ojs.Job{ID: "job-1"}, []byte(`{"a":2}`), rev+100, 0)); !wrongLastSeq(err) {
		t.Fatalf("update at a stale revision: %v, want a wrong last sequence", err)
	}
	rev2, err := st.publish(ctx, recordMsg(&ojs.Job{ID: "job-1"}, []byte(`{"a":3}`), rev, 0))
	if err != nil || rev2 <= rev {
		t.Fatalf("update: %d, %v", rev2, err)
	}
	if e, err := assets.Jobs.Get(ctx, "job-1"); err != nil || string(e.Value()) != `{"a":3}` {
		t.Fatalf("record = %v, %v", e, err)
	}
	// No stream on the subject: jetstream's own error, after its retries.
	start := time.Now()
	_, err = st.publish(ctx, nats.NewMsg("nowhere.at.all"))
	if !errors.Is(err, jetstream.ErrNoStreamResponse) {
		t.Fatalf("publish with no stream: %v", err)
	}
	if waited := time.Since(start); waited < time.Duration(jetstream.DefaultPubRetryAttempts)*jetstream.DefaultPubRetryWait {
		t.Errorf("gave up after %s, without jetstream's retries", waited)
	}
}

// go test -run '^$' -bench ReadPubAck ./jetstream/jobstore
func BenchmarkReadPubAck(b *testing.B) {
	ack := []byte(`{"stream":"KV_OJS_JOBS","seq":1234567}`)
	b.Run("plain", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := readPubAck(ack); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := pubAckByJSON(ack); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// Create is create-if-absent, the fence between racing claimers: a second
// create of an id is a DuplicateError and writes nothing, while an id
// whose record was deleted (a marker: a purge, or the end of its
// retention) may be created again.
func TestCreateOverRecordAndMarker(t *testing.T) {
	ctx, st := testStore(t)
	j := &ojs.Job{SpecVersion: ojs.SpecVersion, ID: ojs.NewID(), Type: "t", Queue: "q", State: ojs.StateActive}
	rev, err := st.Create(ctx, j)
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	if _, err := st.Create(ctx, j); !errors.As(err, new(*ojs.DuplicateError)) {
		t.Fatalf("second create: %v, want a DuplicateError", err)
	}
	if e, err := st.assets.Jobs.Get(ctx, j.ID); err != nil || e.Revision() != rev {
		t.Fatalf("the record after a refused create: %v, %v; want revision %d", e, err, rev)
	}
	if err := st.assets.Jobs.Purge(ctx, j.ID); err != nil {
		t.Fatal(err)
	}
	again, err := st.Create(ctx, j)
	if err != nil || again <= rev {
		t.Fatalf("create over a purge marker: %d, %v", again, err)
	}
	if got, _, err := st.Get(ctx, j.ID); err != nil || got.State != ojs.StateActive {
		t.Fatalf("record after the create over the marker: %v, %v", got, err)
	}
}
