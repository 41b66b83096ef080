package events

import (
	"bytes"
	"cmp"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"

	"github.com/jetgate/jetgate/admission/ojs"
	"github.com/jetgate/jetgate/admission/ojs/uuidv7"
)

// envelope is the event envelope as it was encoded before the
// hand-written encoder: json.Marshal of this struct is the reference the
// encoder must match byte for byte.
type envelope struct {
	SpecVersion     string   `json:"specversion"`
	ID              string   `json:"id"`
	Type            string   `json:"type"`
	Source          string   `json:"source"`
	Time            ojs.Time `json:"time"`
	Subject         string   `json:"subject,omitempty"`
	DataContentType string   `json:"datacontenttype"`
	Data            any      `json:"data"`
}

// referenceEnvelope encodes an event as publish did before the
// hand-written encoder.
func referenceEnvelope(id uuidv7.UUID, eventType, source, subject string, at time.Time, data any) ([]byte, error) {
	return json.Marshal(envelope{
		SpecVersion:     SpecVersion,
		ID:              IDPrefix + uuid.UUID(id).String(),
		Type:            eventType,
		Source:          source,
		Time:            ojs.Time{Time: at.UTC().Truncate(time.Millisecond)},
		Subject:         subject,
		DataContentType: ContentType,
		Data:            data,
	})
}

// referenceMergeData is mergeData as it was: json.Marshal of the data.
func referenceMergeData(d *jobData, extra map[string]any) (map[string]json.RawMessage, error) {
	b, err := json.Marshal(d)
	if err != nil {
		return nil, err
	}
	m := make(map[string]json.RawMessage, 8+len(extra))
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	for k, v := range extra {
		vb, err := json.Marshal(v)
		if err != nil {
			return nil, err
		}
		m[k] = vb
	}
	return m, nil
}

// referencePublishJob is PublishJob as it was before the hand-written
// encoder, for BenchmarkPublishJob: a heap jobData, uuid.NewV7, and
// json.Marshal of the envelope.
func referencePublishJob(p *Publisher, eventType string, job *ojs.Job) {
	d := new(jobData)
	p.fillJobData(d, eventType, job)
	_, tp := traceMeta(job.Meta)
	id, err := uuid.NewV7()
	if err != nil {
		p.drop(eventType, job.ID, "event id", err)
		return
	}
	b, err := referenceEnvelope(uuidv7.UUID(id), eventType, p.cfg.Source, job.ID, p.cfg.Now(), d)
	if err != nil {
		p.drop(eventType, job.ID, "encode", err)
		return
	}
	msg := &nats.Msg{Subject: subjectOf(eventType), Data: b}
	if tp != "" {
		msg.Header = nats.Header{"traceparent": []string{tp}}
	}
	if err := p.nc.PublishMsg(msg); err != nil {
		p.drop(eventType, job.ID, "publish", err)
		return
	}
	p.published.Add(1)
}

// encodeCase is one input of the differential tests.
type encodeCase struct {
	name      string
	eventType string
	job       *ojs.Job
	extra     map[string]any
}

var (
	testEventID = uuidv7.UUID{0x01, 0x93, 0x5f, 0x2a, 0x00, 0x01, 0x7a, 0xbc, 0x80, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77}
	testNow     = time.Date(2026, 11, 25, 12, 0, 0, 123_456_789, time.FixedZone("x", 3600))
	// oddStrings need escaping: HTML characters, quotes, control
	// characters, U+2028 and U+2029, invalid UTF-8, and non-ASCII text.
	oddStrings = []string{
		"", "plain", `<script>alert("x&y")</script>`, "tab\tnl\ncr\rbs\\bell\a\b\f\x00\x1f\x7f",
		"line\u2028para\u2029", "bad\xffutf8\xc3", "caf\u00e9 \U0001F600 \u4e16", "\xe2\x80", "\xed\xa0\x80",
	}
)

func clientTime(t testing.TB, s string) *ojs.Time {
	t.Helper()
	var v ojs.Time
	if err := json.Unmarshal([]byte(`"`+s+`"`), &v); err != nil {
		t.Fatalf("time %q: %v", s, err)
	}
	return &v
}

// encodeCorpus returns jobs and extras covering every event type
// PublishJob handles and every field of jobData and errorData.
func encodeCorpus(t testing.TB) []encodeCase {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 123_000_000, time.UTC)
	at := func(d time.Duration) *ojs.Time { return ojs.NewTime(t0.Add(d)) }
	yes, no := true, false
	base := func() *ojs.Job {
		return &ojs.Job{
			ID: "019352a0-0000-7000-8000-000000000001", Type: "email.send", Queue: "email", Priority: 3,
			Attempt: 2, MaxAttempts: 5, State: ojs.StateActive, WorkerID: "worker-1",
			CreatedAt: at(-time.Hour), EnqueuedAt: at(-time.Minute), StartedAt: at(0), CompletedAt: at(1333 * time.Millisecond),
		}
	}
	with := func(f func(*ojs.Job)) *ojs.Job { j := base(); f(j); return j }
	var cs []encodeCase
	add := func(name, typ string, j *ojs.Job, extra map[string]any) {
		cs = append(cs, encodeCase{name: name, eventType: typ, job: j, extra: extra})
	}
	types := []string{
		TypeJobEnqueued, TypeJobStarted, TypeJobCompleted, TypeJobFailed, TypeJobDiscarded, TypeJobRetrying,
		TypeJobCancelled, TypeJobHeartbeat, TypeJobScheduled, TypeJobExpired, TypeJobProgress, "x.custom", "",
	}
	for _, typ := range types {
		add("base", typ, base(), nil)
		add("bare", typ, &ojs.Job{}, nil)
		add("everything", typ, with(func(j *ojs.Job) {
			j.ScheduledAt, j.NextAttemptAt, j.ExpiresAt = at(time.Hour), at(2*time.Second), at(2*time.Hour)
			j.Internal.LeaseUntil = at(30 * time.Second)
			j.Result = json.RawMessage(`{"ok":true}`)
			j.Error = &ojs.JobError{Code: "boom", Message: "it <broke>", Retryable: &yes, Backtrace: json.RawMessage(`"at x\nat y"`)}
			j.Meta = json.RawMessage(`{"trace_id":"abc","traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}`)
		}), nil)
	}
	for i, s := range oddStrings {
		name := "odd string " + string(rune('a'+i))
		add(name, TypeJobStarted, with(func(j *ojs.Job) { j.Type, j.Queue, j.WorkerID, j.ID = s, s, s, s }), nil)
		add(name, TypeJobFailed, with(func(j *ojs.Job) {
			j.Error = &ojs.JobError{Code: s, Message: s, Backtrace: mustJSON(t, s)}
			j.Meta = mustJSON(t, map[string]string{"trace_id": s})
		}), nil)
		add(name+" extra", TypeJobCancelled, base(), map[string]any{"reason": s, s: s})
	}
	for _, r := range []string{
		`{"message_id":"msg_abc123"}`, `[1,2,3]`, `null`, `0`, `-1.5e300`, `"s"`, `true`, `{}`, `[]`,
		"{ \"a\" : [ 1 , 2 ] ,\n\t\"b\" : { } }\r\n", ` "padded" `, `{"html":"<b>&amp;</b>"}`, `"\u003c already escaped"`,
		"\"raw \u2028 and \u2029\"", "\"bad \xff utf8\"", `{"deep":[[[[{"x":[{"y":null}]}]]]]}`, `"caf` + "\u00e9" + `"`,
		"\"\xe2\x80\"", `{`, `[1,]`, `1 2`, `nul`, ` `, "{\"a\":\"\x01\"}", `{"a":1}x`,
	} {
		add("result "+r, TypeJobCompleted, with(func(j *ojs.Job) { j.Result = json.RawMessage(r) }), nil)
	}
	add("result empty non-nil", TypeJobCompleted, with(func(j *ojs.Job) { j.Result = json.RawMessage{} }), nil)
	add("completed never started", TypeJobCompleted, with(func(j *ojs.Job) { j.StartedAt = nil }), nil)
	add("completed before start", TypeJobCompleted, with(func(j *ojs.Job) { j.CompletedAt = at(-time.Second) }), nil)
	add("completed no end", TypeJobCompleted, with(func(j *ojs.Job) { j.CompletedAt = nil }), nil)
	add("started no worker", TypeJobStarted, with(func(j *ojs.Job) { j.WorkerID = "" }), nil)
	add("queue default", TypeJobEnqueued, with(func(j *ojs.Job) { j.Queue = "" }), nil)
	add("negative priority", TypeJobEnqueued, with(func(j *ojs.Job) { j.Priority = -100 }), nil)
	add("scheduled", TypeJobEnqueued, with(func(j *ojs.Job) { j.ScheduledAt = at(time.Hour) }), nil)
	for _, s := range []string{"2026-01-02T04:04:05.5+01:00", "2026-01-02T03:04:05Z", "2026-01-02T03:04:05.123456789Z", "2026-01-02T03:04:05.1-00:30"} {
		add("scheduled client text "+s, TypeJobScheduled, with(func(j *ojs.Job) { j.ScheduledAt = clientTime(t, s) }), nil)
		add("retry at client text "+s, TypeJobRetrying, with(func(j *ojs.Job) { j.NextAttemptAt = clientTime(t, s) }), nil)
	}
	add("failed no error", TypeJobFailed, base(), nil)
	add("failed retryable state", TypeJobFailed, with(func(j *ojs.Job) { j.State = ojs.StateRetryable }), nil)
	add("failed not retryable flag", TypeJobFailed, with(func(j *ojs.Job) {
		j.State = ojs.StateRetryable
		j.Error = &ojs.JobError{Type: "TypeOnly", Message: "m", Retryable: &no}
	}), nil)
	add("failed errors list", TypeJobFailed, with(func(j *ojs.Job) {
		j.Errors = []ojs.JobError{{Code: "first"}, {Code: "last", Message: "latest", Backtrace: json.RawMessage(`["a","<b>"]`)}}
	}), nil)
	for _, bt := range []string{`"one line"`, `["a","b"]`, `[]`, `""`, `{"not":"a trace"}`, `[1,2]`, `nonsense`} {
		add("backtrace "+bt, TypeJobFailed, with(func(j *ojs.Job) { j.Error = &ojs.JobError{Code: "c", Backtrace: json.RawMessage(bt)} }), nil)
	}
	add("failed never started", TypeJobFailed, with(func(j *ojs.Job) { j.StartedAt = nil }), nil)
	add("discarded errors", TypeJobDiscarded, with(func(j *ojs.Job) { j.Errors = []ojs.JobError{{Message: "x"}} }), nil)
	add("heartbeat no lease", TypeJobHeartbeat, base(), nil)
	add("expired ttl", TypeJobExpired, with(func(j *ojs.Job) { j.ExpiresAt = at(90 * time.Second) }), nil)
	add("expired enqueued only", TypeJobExpired, with(func(j *ojs.Job) { j.CreatedAt = nil; j.ExpiresAt = at(time.Hour) }), nil)
	add("expired no times", TypeJobExpired, with(func(j *ojs.Job) { j.CreatedAt, j.EnqueuedAt = nil, nil }), nil)
	add("expired in the past", TypeJobExpired, with(func(j *ojs.Job) { j.ExpiresAt = at(-2 * time.Hour) }), nil)
	for _, m := range []string{
		`{"trace_id":"t-1"}`, `{"traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}`,
		`{"traceparent":"not-one"}`, `{"trace_id":"","traceparent":"00-0123456789abcdef0123456789abcdef-0123456789abcdef-00"}`,
		`{"trace":1}`, `{"trace_id":`, `{"other":"x"}`,
	} {
		add("meta "+m, TypeJobEnqueued, with(func(j *ojs.Job) { j.Meta = json.RawMessage(m) }), nil)
	}
	add("extra reason", TypeJobScheduled, base(), map[string]any{"reason": "rate_limit"})
	add("extra overrides", TypeJobFailed, base(), map[string]any{"attempt": 7, "queue": nil, "note": []int{1}})
	add("extra nested", TypeJobEnqueued, base(), map[string]any{"retried_from": "dead_letter", "x": map[string]any{"<": 1.5}})
	add("extra not encodable", TypeJobProgress, base(), map[string]any{"f": func() {}})
	add("extra with bad result", TypeJobCompleted, with(func(j *ojs.Job) { j.Result = json.RawMessage(`{`) }), map[string]any{"a": 1})
	add("extra with odd result", TypeJobCompleted, with(func(j *ojs.Job) { j.Result = json.RawMessage(" [\"<\u2028>\"] ") }), map[string]any{"a": 1})
	return cs
}

func mustJSON(t testing.TB, v any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// encodeBoth encodes a job event with the encoder and with the
// reference.
func encodeBoth(p *Publisher, c encodeCase, id uuidv7.UUID, at time.Time) (got, want []byte, gotErr, wantErr error) {
	var d jobData
	p.fillJobData(&d, c.eventType, c.job)
	var ref any = &d
	if len(c.extra) > 0 {
		ref, wantErr = referenceMergeData(&d, c.extra)
	}
	if wantErr == nil {
		want, wantErr = referenceEnvelope(id, c.eventType, p.cfg.Source, c.job.ID, at, ref)
	}
	if len(c.extra) == 0 {
		got, gotErr = appendEnvelope(nil, &id, c.eventType, p.cfg.Source, c.job.ID, at, &d, nil)
		return got, want, gotErr, wantErr
	}
	merged, gotErr := mergeData(&d, c.extra)
	if gotErr == nil {
		got, gotErr = appendEnvelope(nil, &id, c.eventType, p.cfg.Source, c.job.ID, at, nil, merged)
	}
	return got, want, gotErr, wantErr
}

func checkSame(t *testing.T, name string, got, want []byte, gotErr, wantErr error) {
	t.Helper()
	switch {
	case (gotErr != nil) != (wantErr != nil):
		t.Errorf("%s: error %v, reference error %v\n got: %s\nwant: %s", name, gotErr, wantErr, got, want)
	case !bytes.Equal(got, want):
		t.Errorf("%s:\n got: %s\nwant: %s", name, got, want)
	}
}

// testPublisher is a Publisher without a connection, for encoding.
func testPublisher(source string) *Publisher {
	return &Publisher{cfg: Config{Source: source, Now: func() time.Time { return testNow }}}
}

// The encoder writes what json.Marshal wrote for the envelope struct, for
// every job event type, with and without extra fields, for strings that
// need escaping, raw results that need compacting or escaping or are
// invalid (both fail then), and client timestamps.
func TestEncodeMatchesReflection(t *testing.T) {
	t.Parallel()
	corpus := encodeCorpus(t)
	ids := []uuidv7.UUID{testEventID, {}, {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, 0xff, 0xbf, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}}
	times := []time.Time{testNow, {}, time.Unix(0, 0), time.Date(9999, 12, 31, 23, 59, 59, 999_999_999, time.UTC), time.Date(-5, 1, 1, 0, 0, 0, 1, time.UTC)}
	sources := append([]string{testSource}, oddStrings...)
	for i, c := range corpus {
		p := testPublisher(sources[i%len(sources)])
		got, want, gotErr, wantErr := encodeBoth(p, c, ids[i%len(ids)], times[i%len(times)])
		checkSame(t, c.eventType+" "+c.name, got, want, gotErr, wantErr)
	}
}

// Publish's data other than job data goes through encoding/json, as
// before.
func TestEncodeOtherDataMatchesReflection(t *testing.T) {
	t.Parallel()
	for _, data := range []any{
		nil, queueData{Queue: "q<1>", PausedBy: "api"}, map[string]any{"worker_id": "w\u2028", "active_jobs": 3},
		json.RawMessage(" { \"a\" : \"<\" } "), struct{}{}, func() {},
	} {
		for _, subject := range []string{"", "job-1", "q\xff"} {
			want, wantErr := referenceEnvelope(testEventID, TypeQueuePaused, testSource, subject, testNow, data)
			got, gotErr := appendEnvelope(nil, &testEventID, TypeQueuePaused, testSource, subject, testNow, nil, data)
			checkSame(t, subject, got, want, gotErr, wantErr)
		}
	}
}

// What a subscriber receives from PublishJob is the reference encoding
// of the event, with the id and time it carries.
func TestPublishJobMatchesReflection(t *testing.T) {
	t.Parallel()
	p, b := setup(t, Config{Now: func() time.Time { return testNow }})
	ch := subscribe(t, b.nc)
	published := 0
	for _, c := range encodeCorpus(t) {
		_, _, _, wantErr := encodeBoth(p, c, testEventID, testNow)
		if c.eventType == "" { // no valid NATS subject
			continue
		}
		p.PublishJob(c.eventType, c.job, c.extra)
		if wantErr != nil {
			continue
		}
		published++
		m := receive(t, ch)
		var ev ojs.Event
		if err := json.Unmarshal(m.Data, &ev); err != nil {
			t.Fatalf("%s: %v: %s", c.name, err, m.Data)
		}
		id, err := uuid.Parse(strings.TrimPrefix(ev.ID, IDPrefix))
		if err != nil {
			t.Fatalf("%s: id %q: %v", c.name, ev.ID, err)
		}
		_, want, _, _ := encodeBoth(p, c, uuidv7.UUID(id), testNow)
		checkSame(t, c.eventType+" "+c.name, m.Data, want, nil, nil)
	}
	if st := p.Stats(); st.Published != uint64(published) {
		t.Errorf("stats = %+v, want %d published", st, published)
	}
}

// BenchmarkEventEncoding compares the encoder with json.Marshal of the
// envelope, without NATS.
func BenchmarkEventEncoding(b *testing.B) {
	p := testPublisher(testSource)
	now := ojs.NewTime(testNow)
	job := &ojs.Job{ID: "job-1", Type: "email.send", Queue: "email", Attempt: 1, StartedAt: now, CompletedAt: now,
		Result: json.RawMessage(`{"message_id":"msg_abc123"}`)}
	for _, typ := range []string{TypeJobEnqueued, TypeJobStarted, TypeJobCompleted} {
		b.Run("reference/"+typ, func(b *testing.B) {
			b.ReportAllocs()
			for range b.N {
				d := new(jobData)
				p.fillJobData(d, typ, job)
				if _, err := referenceEnvelope(testEventID, typ, testSource, job.ID, testNow, d); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("appender/"+typ, func(b *testing.B) {
			b.ReportAllocs()
			buf := make([]byte, 0, 1024)
			for range b.N {
				var d jobData
				p.fillJobData(&d, typ, job)
				var err error
				if buf, err = appendEnvelope(buf[:0], &testEventID, typ, testSource, job.ID, testNow, &d, nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// fuzzTypes are the event types FuzzEventEncoding picks from.
var fuzzTypes = []string{
	TypeJobEnqueued, TypeJobStarted, TypeJobCompleted, TypeJobFailed, TypeJobDiscarded, TypeJobRetrying,
	TypeJobCancelled, TypeJobHeartbeat, TypeJobScheduled, TypeJobExpired, TypeJobProgress, "x.custom", "",
}

// fuzzJob is the input of FuzzEventEncoding: a job event in primitive
// fields.
type fuzzJob struct {
	typ                               uint8 // index into fuzzTypes
	jobType, queue, id, workerID      string
	result                            []byte
	code, message                     string
	backtrace, meta                   []byte
	at                                string // scheduled_at, next_attempt_at, lease and expires_at, when RFC 3339
	priority, attempt                 int
	startMs, endMs, createdMs         int64 // endMs is also the clock (with createdMs's last digits as ns)
	flags                             uint8 // fuzzStarted ...
	retryableSet, retryable, errsList bool
	extraKey, extraValue, source      string
}

// Bits of fuzzJob.flags.
const (
	fuzzStarted = 1 << iota
	fuzzCompleted
	fuzzCreated
	fuzzStateRetryable
	fuzzError
	fuzzExtra
)

// fuzzArgs turns a corpus case into a fuzz input, as far as it goes.
func fuzzArgs(c encodeCase) fuzzJob {
	j := c.job
	in := fuzzJob{
		typ: uint8(max(slices.Index(fuzzTypes, c.eventType), 0)), jobType: j.Type, queue: j.Queue, id: j.ID,
		workerID: j.WorkerID, result: j.Result, meta: j.Meta, priority: j.Priority, attempt: j.Attempt, source: testSource,
	}
	e := j.Error
	if e == nil && len(j.Errors) > 0 {
		e, in.errsList = &j.Errors[len(j.Errors)-1], true
	}
	if e != nil {
		in.flags |= fuzzError
		in.code, in.message, in.backtrace = cmp.Or(e.Code, e.Type), e.Message, e.Backtrace
		if e.Retryable != nil {
			in.retryableSet, in.retryable = true, *e.Retryable
		}
	}
	for _, t := range []*ojs.Time{j.ScheduledAt, j.NextAttemptAt, j.Internal.LeaseUntil, j.ExpiresAt} {
		if t != nil {
			in.at = t.Text()
			break
		}
	}
	if j.StartedAt != nil {
		in.flags, in.startMs = in.flags|fuzzStarted, j.StartedAt.UnixMilli()
	}
	if j.CompletedAt != nil {
		in.flags, in.endMs = in.flags|fuzzCompleted, j.CompletedAt.UnixMilli()
	}
	if j.CreatedAt != nil {
		in.flags, in.createdMs = in.flags|fuzzCreated, j.CreatedAt.UnixMilli()
	}
	if j.State == ojs.StateRetryable {
		in.flags |= fuzzStateRetryable
	}
	for k, v := range c.extra {
		if s, ok := v.(string); ok {
			in.flags, in.extraKey, in.extraValue = in.flags|fuzzExtra, k, s
			break
		}
	}
	return in
}

// job returns the job and extra fields of a fuzz input.
func (in fuzzJob) job() (string, *ojs.Job, map[string]any) {
	j := &ojs.Job{
		ID: in.id, Type: in.jobType, Queue: in.queue, WorkerID: in.workerID, Result: in.result, Meta: in.meta,
		Priority: in.priority, Attempt: in.attempt, MaxAttempts: in.attempt + 1, State: ojs.StateActive,
	}
	var at ojs.Time
	if at.UnmarshalJSON([]byte(`"`+in.at+`"`)) == nil {
		j.ScheduledAt, j.NextAttemptAt, j.Internal.LeaseUntil, j.ExpiresAt = &at, &at, &at, &at
	}
	if in.flags&fuzzStarted != 0 {
		j.StartedAt = ojs.NewTime(time.UnixMilli(in.startMs))
	}
	if in.flags&fuzzCompleted != 0 {
		j.CompletedAt = ojs.NewTime(time.UnixMilli(in.endMs))
	}
	if in.flags&fuzzCreated != 0 {
		j.CreatedAt = ojs.NewTime(time.UnixMilli(in.createdMs))
	}
	if in.flags&fuzzStateRetryable != 0 {
		j.State = ojs.StateRetryable
	}
	if in.flags&fuzzError != 0 {
		e := ojs.JobError{Code: in.code, Message: in.message, Backtrace: in.backtrace}
		if in.retryableSet {
			e.Retryable = &in.retryable
		}
		if in.errsList {
			j.Errors = []ojs.JobError{{Code: "earlier"}, e}
		} else {
			j.Error = &e
		}
	}
	var extra map[string]any
	if in.flags&fuzzExtra != 0 {
		extra = map[string]any{in.extraKey: in.extraValue}
	}
	return fuzzTypes[int(in.typ)%len(fuzzTypes)], j, extra
}

// FuzzEventEncoding checks the encoder against json.Marshal of the
// envelope struct, as TestEncodeMatchesReflection does, on job events
// built from fuzzed fields; the seeds are that test's corpus.
func FuzzEventEncoding(f *testing.F) {
	for _, c := range encodeCorpus(f) {
		in := fuzzArgs(c)
		f.Add(in.typ, in.jobType, in.queue, in.id, in.workerID, in.result, in.code, in.message, in.backtrace, in.meta,
			in.at, in.priority, in.attempt, in.startMs, in.endMs, in.createdMs, in.flags, in.retryableSet, in.retryable,
			in.errsList, in.extraKey, in.extraValue, in.source)
	}
	f.Fuzz(func(t *testing.T, typ uint8, jobType, queue, id, workerID string, result []byte, code, message string,
		backtrace, meta []byte, at string, priority, attempt int, startMs, endMs, createdMs int64, flags uint8,
		retryableSet, retryable, errsList bool, extraKey, extraValue, source string) {
		in := fuzzJob{
			typ: typ, jobType: jobType, queue: queue, id: id, workerID: workerID, result: result, code: code,
			message: message, backtrace: backtrace, meta: meta, at: at, priority: priority, attempt: attempt,
			startMs: startMs, endMs: endMs, createdMs: createdMs, flags: flags, retryableSet: retryableSet,
			retryable: retryable, errsList: errsList, extraKey: extraKey, extraValue: extraValue, source: source,
		}
		eventType, job, extra := in.job()
		c := encodeCase{eventType: eventType, job: job, extra: extra}
		eventID := testEventID
		eventID[15] = typ
		now := time.UnixMilli(endMs).Add(time.Duration(createdMs % 1e6))
		p := testPublisher(source)
		p.cfg.Now = func() time.Time { return now }
		got, want, gotErr, wantErr := encodeBoth(p, c, eventID, now)
		checkSame(t, eventType, got, want, gotErr, wantErr)
	})
}

// Issue 32 events: the fields of a reduced job event (result_omitted,
// result_bytes, data_truncated, event_bytes) encode as json.Marshal
// writes them, set or not.
func TestEncodeReducedFieldsMatchReflection(t *testing.T) {
	t.Parallel()
	for _, d := range []jobData{
		{JobType: "t", Queue: "q", ResultOmitted: true, ResultBytes: 12345},
		{JobType: "t", Queue: "q", Attempt: ptr(2), Error: &errorData{Code: "boom"}, DataTruncated: true, EventBytes: 99999},
		{JobType: "t", Queue: "q", ResultOmitted: true, ResultBytes: 7, TraceID: "x", DataTruncated: true, EventBytes: 1},
	} {
		want, wantErr := referenceEnvelope(testEventID, TypeJobCompleted, testSource, "job-1", testNow, &d)
		got, gotErr := appendEnvelope(nil, &testEventID, TypeJobCompleted, testSource, "job-1", testNow, &d, nil)
		checkSame(t, "reduced", got, want, gotErr, wantErr)
	}
}
