package ojs

import (
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// sizeBound is never below the record's size: with every field set
// (fullJob), and with random fields of text that grows six times when
// written, raw JSON with white space, errors with details and backtraces,
// and numbers at their longest.
func TestSizeBoundHolds(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(31, 3))
	text := func() string {
		pieces := []string{"a", "<", "&", "\x00", "é", "\u2028", `"`, `\`, "😀"}
		var sb strings.Builder
		for range r.IntN(40) {
			sb.WriteString(pieces[r.IntN(len(pieces))])
		}
		return sb.String()
	}
	raw := func() json.RawMessage {
		b, _ := json.Marshal(map[string]any{text(): []any{text(), 1.5, nil, map[string]any{"k": text()}}})
		if r.IntN(2) == 0 {
			return json.RawMessage(" \n" + string(b) + " ")
		}
		return b
	}
	widest := 0
	for i := range 3000 {
		j := fullJob()
		if i > 0 {
			j.Type, j.Queue, j.ID, j.Schema, j.WorkerID, j.ProgressMessage = text(), text(), text(), text(), text(), text()
			j.Tags = []string{text(), text()}
			j.Args, j.Meta, j.Unique, j.Result, j.ProgressData, j.LastCheckpoint = raw(), raw(), raw(), raw(), raw(), raw()
			j.Extra = map[string]json.RawMessage{text(): raw(), "options": raw()}
			j.Error.Message, j.Error.Details, j.Error.Backtrace = text(), raw(), raw()
			j.Errors = append(j.Errors, JobError{Type: text(), Message: text(), Details: raw(), Attempt: math.MaxInt32,
				At: j.CreatedAt, RateLimitUntil: j.CreatedAt, TimeoutKind: "execution", LimitSeconds: math.MaxInt64,
				ElapsedSeconds: math.MaxInt64, LimitMs: math.MaxInt64, ElapsedMs: math.MaxInt64})
			j.Internal.Limits = append(j.Internal.Limits, text())
			j.Internal.HeldAck, j.Internal.Token = text(), text()
			j.RateLimit.Key = text()
			j.Retry.NonRetryableErrors = []string{text()}
			j.Attempt, j.MaxAttempts, j.Priority = math.MaxInt32, math.MaxInt32, math.MinInt32
			j.TimeoutMs, j.TotalTimeoutMs, j.Internal.DepthSeq = math.MaxInt64, math.MinInt64, math.MaxUint64
			j.Retry.MaxInterval = Duration(math.MaxInt64)
		}
		b, err := j.AppendJSON(nil)
		if err != nil {
			t.Fatal(err)
		}
		if bound := j.sizeBound(); bound < len(b) {
			t.Fatalf("sizeBound %d < %d bytes written: %s", bound, len(b), b)
		}
		if size, fits, err := j.EncodedSize(len(b)); err != nil || !fits || size < len(b) {
			t.Fatalf("EncodedSize(%d) = %d, %v, %v", len(b), size, fits, err)
		}
		if size, fits, err := j.EncodedSize(len(b) - 1); err != nil || fits || size != len(b) {
			t.Fatalf("EncodedSize(%d) = %d, %v, %v; want the exact %d, over", len(b)-1, size, fits, err, len(b))
		}
		if i == 0 {
			widest = len(b) - len(j.Args) - len(j.Meta) - len(j.Unique) - len(j.Result) - len(j.ProgressData) - len(j.LastCheckpoint)
		}
	}
	t.Logf("fixed part of fullJob: %d bytes", widest)
	if widest > boundFixed {
		t.Errorf("fullJob's fixed part is %d bytes, over boundFixed %d", widest, boundFixed)
	}
}

// The record budget of issue 31 at NATS's default max_payload (1 MiB):
// 960 KiB for a job, 16 KiB for a result, 8 KiB for an error, 16 KiB of
// errors history and of progress; below 128 KiB jetgate does not run.
func TestPayloadLimits(t *testing.T) {
	t.Parallel()
	l, err := NewPayloadLimits(1 << 20)
	if err != nil {
		t.Fatal(err)
	}
	if l.Reserve != 64<<10 || l.Job != 960<<10 || l.Result != 16<<10 || l.Error != 8<<10 || l.Errors != 16<<10 || l.Progress != 16<<10 {
		t.Fatalf("limits at 1 MiB: %+v", l)
	}
	// The embedded server's 2 MiB: a 1 MiB envelope (ojs-json-format.md
	// 8.1) fits the job limit with room for all the fields a server adds.
	if l2, _ := NewPayloadLimits(2 << 20); l2.Reserve != 128<<10 || l2.Job != 1920<<10 || l2.Result != 32<<10 ||
		l2.Error != 16<<10 || l2.Errors != 32<<10 || l2.Progress != 32<<10 || l2.Job < 1<<20+boundFixed {
		t.Fatalf("limits at 2 MiB: %+v", l2)
	}
	if big, _ := NewPayloadLimits(8 << 20); big.Reserve != 512<<10 || big.Job != 8<<20-512<<10 || big.Result != 128<<10 {
		t.Fatalf("limits at 8 MiB: %+v", big)
	}
	if _, err := NewPayloadLimits(MinMaxPayload - 1); err == nil || !strings.Contains(err.Error(), "131071") {
		t.Fatalf("max_payload below the minimum: %v", err)
	}
	// The parts and the server's share add up to the reserve: the last
	// error is stored twice (error, and the newest of errors).
	if l.Result+l.Error+l.Errors+l.Progress+serverShare(l) != l.Reserve {
		t.Fatalf("the parts of %+v do not add up to the reserve", l)
	}
}

func serverShare(l PayloadLimits) int64 { return l.Reserve / 8 }

// Issue 31: a record at its largest stays within max_payload: a job at
// the enqueue limit, then every server field at its longest (timestamps,
// a 256-byte worker id of characters that grow sixfold, lease, held
// message, limits, a total-timeout error), a result, an error and a
// history at their limits, progress at its limit, and the headers of a
// record write.
func TestRecordBudgetHoldsTheServerFields(t *testing.T) {
	t.Parallel()
	l, err := NewPayloadLimits(1 << 20)
	if err != nil {
		t.Fatal(err)
	}
	at := NewTime(time.Date(2026, 11, 22, 21, 0, 0, 123_000_000, time.UTC))
	j := &Job{SpecVersion: SpecVersion, ID: NewID(), Type: "a.b", Queue: "q", State: StateAvailable,
		Retry: &RetryPolicy{MaxAttempts: math.MaxInt32}, MaxAttempts: math.MaxInt32, CreatedAt: at, EnqueuedAt: at,
		Meta: json.RawMessage(`{"traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}`)}
	b, _ := j.AppendJSON(nil)
	j.Args = json.RawMessage(`["` + strings.Repeat("x", int(l.Job)-len(b)-len(`,"args":[""]`)) + `"]`)
	if err := l.CheckJob(j, ""); err != nil {
		t.Fatalf("a job at the limit: %v", err)
	}
	enqueued, _ := j.AppendJSON(nil)

	fill := func(limit int64, wrap string) json.RawMessage {
		return json.RawMessage(strings.Replace(wrap, "%", strings.Repeat("y", int(limit)-len(wrap)+1), 1))
	}
	j.State, j.Attempt = StateCompleted, math.MaxInt32
	j.StartedAt, j.CompletedAt, j.CancelledAt, j.DiscardedAt, j.ActivatedAt, j.NextAttemptAt = at, at, at, at, at, at
	j.WorkerID = strings.Repeat("<", 256)
	j.Internal = Internal{Token: NewID(), LeaseUntil: at, BeatMs: math.MaxInt64,
		HeldAck:   "$JS.ACK.OJS_READY.ojs-q-" + strings.Repeat("q", 128) + "-999.1.18446744073709551615.18446744073709551615.18446744073709551615.1764000000000000000.18446744073709551615",
		HeldToken: NewID(), Limits: []string{"c." + strings.Repeat("k", 255), "q." + strings.Repeat("q", 128)},
		DepthSeq: math.MaxUint64, OverSeq: math.MaxUint64, Origin: NewID()}
	j.Result = fill(l.Result, `{"r":"%"}`)
	if !l.CheckResult(j.Result) {
		t.Fatalf("a result at the limit refused")
	}
	failure := JobError{Code: "c", Message: "m", Attempt: math.MaxInt32, At: at}
	mb, _ := json.Marshal(failure)
	failure.Message = strings.Repeat("m", int(l.Error)-len(mb)+1)
	if err := l.CheckError(failure); err != nil {
		t.Fatalf("an error at the limit: %v", err)
	}
	for range 40 {
		j.Errors = AppendError(j.Errors, failure, l.Errors)
	}
	j.Error = &failure
	progress := 1.0
	j.Progress, j.ProgressUpdatedAt = &progress, at
	j.ProgressData = fill(l.Progress/2, `{"d":"%"}`)
	j.LastCheckpoint = fill(l.Progress/2-int64(jsonStringLen("done")), `{"c":"%"}`)
	j.ProgressMessage = "done"
	if err := l.CheckProgress(j); err != nil {
		t.Fatalf("progress at the limit: %v", err)
	}
	final, err := j.AppendJSON(nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.CheckResultIn(j); err != nil {
		t.Fatalf("the record at its largest: %v", err)
	}
	headers := int64(len("NATS/1.0\r\nNats-Expected-Last-Subject-Sequence: 18446744073709551615\r\nNats-TTL: 2562047h47m16s\r\n\r\n"))
	if headers > RecordHeaders {
		t.Fatalf("headers take %d bytes, over RecordHeaders %d", headers, RecordHeaders)
	}
	if got := int64(len(final)) + headers; got > l.MaxPayload {
		t.Fatalf("the record grew from %d to %d bytes with headers, over max_payload %d", len(enqueued), got, l.MaxPayload)
	}
	grown := int64(len(final)) - int64(len(enqueued)) - int64(len(j.Result)) - int64(len(j.ProgressData)) - int64(len(j.LastCheckpoint))
	errs, _ := json.Marshal(j.Errors)
	e, _ := json.Marshal(j.Error)
	server := grown - int64(len(errs)) - int64(len(e)) + headers
	t.Logf("enqueued %d, final %d (+%d headers), server fields and headers %d of %d", len(enqueued), len(final), headers, server, serverShare(l))
	if server > serverShare(l) {
		t.Fatalf("server fields and headers take %d bytes, over their share %d", server, serverShare(l))
	}
}

// Issue 31: the errors history keeps the newest failures that fit, and
// always the newest one.
func TestAppendErrorKeepsTheNewestWithinTheLimit(t *testing.T) {
	t.Parallel()
	var errs []JobError
	for i := 1; i <= 1000; i++ {
		errs = AppendError(errs, JobError{Message: strings.Repeat("e", 3000), Attempt: i}, 16<<10)
		b, _ := json.Marshal(errs)
		if len(b) > 16<<10 || errs[len(errs)-1].Attempt != i {
			t.Fatalf("after %d nacks: %d bytes, newest attempt %d", i, len(b), errs[len(errs)-1].Attempt)
		}
	}
	if len(errs) != 5 || errs[0].Attempt != 996 {
		t.Fatalf("kept %d errors from attempt %d, want the newest 5", len(errs), errs[0].Attempt)
	}
	// One error larger than the limit alone is still kept.
	if got := AppendError(errs, JobError{Message: strings.Repeat("x", 20<<10)}, 16<<10); len(got) != 1 {
		t.Fatalf("kept %d errors", len(got))
	}
}

// Each check names its part, the limit and the size, as a 413.
func TestChecksNameLimitAndSize(t *testing.T) {
	t.Parallel()
	l, _ := NewPayloadLimits(1 << 20)
	big := json.RawMessage(`"` + strings.Repeat("r", 20<<10) + `"`)
	spaced := json.RawMessage("[" + strings.Repeat(" ", 30<<10) + "1]")
	if l.CheckResult(big) || !l.CheckResult(json.RawMessage(`{"ok":true}`)) {
		t.Errorf("CheckResult says 20 KiB fits or a small result does not")
	}
	for name, err := range map[string]error{
		"error":    l.CheckError(JobError{Message: strings.Repeat("<", 2<<10)}), // 12 KiB once escaped
		"progress": l.CheckProgress(&Job{ProgressData: big}),
		"":         l.CheckJob(&Job{Args: json.RawMessage(`["` + strings.Repeat("a", 1<<20) + `"]`)}, ""),
	} {
		var te *TooLargeError
		if !errors.As(err, &te) || te.Field != name || te.Limit <= 0 || te.Size <= te.Limit || !errors.Is(err, ErrTooLarge) ||
			!strings.Contains(err.Error(), "bytes") || te.Hint == "" {
			t.Errorf("%s: %v", name, err)
		}
	}
	if !l.CheckResult(spaced) {
		t.Errorf("a result whose white space takes it over the limit refused")
	}
}

// A result ends the job's changes: it may take the room its record has
// left, at least the result's part of the reserve. Over that room it is
// 413 naming the room.
func TestCheckResultInTakesTheRoomLeft(t *testing.T) {
	t.Parallel()
	l, _ := NewPayloadLimits(1 << 20)
	small := &Job{ID: NewID(), Type: "a", Queue: "q", State: StateCompleted, Args: json.RawMessage(`[]`)}
	small.Result = json.RawMessage(`"` + strings.Repeat("r", 900<<10) + `"`)
	if err := l.CheckResultIn(small); err != nil {
		t.Fatalf("a 900 KiB result of a small job: %v", err)
	}
	big := &Job{ID: NewID(), Type: "a", Queue: "q", State: StateCompleted,
		Args: json.RawMessage(`["` + strings.Repeat("a", int(l.Job)-200) + `"]`)}
	big.Result = json.RawMessage(`"` + strings.Repeat("r", int(l.Result)) + `"`)
	if err := l.CheckResultIn(big); err != nil {
		t.Fatalf("a result of the guaranteed part on a job at the limit: %v", err)
	}
	big.Result = json.RawMessage(`"` + strings.Repeat("r", 100<<10) + `"`)
	err := l.CheckResultIn(big)
	var te *TooLargeError
	if !errors.As(err, &te) || te.Field != "result" || te.Limit < l.Result || te.Limit >= te.Size || te.Size != 100<<10+2 {
		t.Fatalf("a 100 KiB result on a job at the limit: %v", err)
	}
	b, _ := big.AppendJSON(nil)
	if room := l.Record - (int64(len(b)) - te.Size); te.Limit != room {
		t.Fatalf("limit %d, want the room left %d", te.Limit, room)
	}
}
