package ojs

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
)

// The record budget (issue 31). Every message jetgate stores must fit the
// NATS server's max_payload (headers and data together), and a job's
// record grows after its enqueue: the server's fields (timestamps, worker,
// lease), an ack's result, a nack's error and the history of errors, a
// worker's progress. So a job may take max_payload minus a reserve when
// it is enqueued, and the reserve is shared out between what may come
// later, each part with a limit that a request over it meets as a 413
// before anything is written:
//
//	reserve    max(64 KiB, max_payload/16)      64 KiB at NATS's default 1 MiB
//	job        max_payload - reserve             960 KiB: the job as stored at enqueue
//	result     reserve/4                         16 KiB: an ack's result, as stored, always;
//	                                             more when the record has room (below)
//	error      reserve/8                          8 KiB: a nack's error, as stored
//	errors     reserve/4                         16 KiB: the errors history; the oldest go first
//	progress   reserve/4                         16 KiB: progress data, message and checkpoint together
//	server     reserve/8                          8 KiB: server fields and message headers
//
// The parts add up to the reserve (the last error is stored twice, as
// "error" and as the newest entry of "errors"), so a record never outgrows
// max_payload whatever happens to the job. TestRecordBudgetHoldsTheServerFields
// measures the server's part at its largest. A result ends the job's
// changes, so it may also take whatever room its record has left: up to
// Record, the largest record, with the rest of the job (CheckResultIn).
const (
	// MinReserve is the least reserve, and MinMaxPayload the least
	// max_payload jetgate runs with (a job may then take 64 KiB).
	MinReserve    int64 = 64 << 10
	MinMaxPayload int64 = 2 * MinReserve
)

// PayloadLimits are the size limits of the record budget for one NATS
// max_payload.
type PayloadLimits struct {
	// MaxPayload is the NATS server's max_payload.
	MaxPayload int64
	// Reserve is kept in every record for what a job gains after enqueue.
	Reserve int64
	// Job bounds a job as stored at enqueue (its JSON record).
	Job int64
	// Result bounds an ack's result as stored (compacted JSON).
	Result int64
	// Error bounds a nack's error as stored (with its attempt and time).
	Error int64
	// Errors bounds the errors history; the oldest entries are dropped
	// to keep it within.
	Errors int64
	// Progress bounds a job's progress data, message and checkpoint
	// together, as stored.
	Progress int64
	// Record bounds a record as stored: max_payload less room for the
	// headers of its message (RecordHeaders).
	Record int64
}

// RecordHeaders is room kept in max_payload for the headers of a record's
// message (an expected sequence and a TTL: about 100 bytes).
const RecordHeaders = 1 << 10

// NewPayloadLimits returns the record budget for a NATS max_payload of
// maxPayload bytes, which must be at least MinMaxPayload.
func NewPayloadLimits(maxPayload int64) (PayloadLimits, error) {
	if maxPayload < MinMaxPayload {
		return PayloadLimits{}, fmt.Errorf("the NATS server's max_payload is %d bytes; jetgate needs at least %d "+
			"(a job's record keeps a reserve of %d bytes for its result, errors and progress)", maxPayload, MinMaxPayload, MinReserve)
	}
	r := max(MinReserve, maxPayload/16)
	return PayloadLimits{MaxPayload: maxPayload, Reserve: r, Job: maxPayload - r,
		Result: r / 4, Error: r / 8, Errors: r / 4, Progress: r / 4, Record: maxPayload - RecordHeaders}, nil
}

// TooLargeError is a request, or a part of one, over a size limit: 413
// payload_too_large, not retryable (the same request will not fit).
type TooLargeError struct {
	// Field names the part: "" for the whole body, "jobs[3]" for a job of
	// a batch, "result", "error", "progress".
	Field string
	// What the limit is of, for the message: "request body", "job as
	// stored", "ack result", ...
	What string
	// Limit and Size in bytes; Size is 0 when unknown (a body cut off at
	// the limit).
	Limit, Size int64
	// Hint says what to do about it (the error envelope's hint).
	Hint string
}

func (e *TooLargeError) Error() string {
	what := e.What
	if e.Field != "" {
		what = fmt.Sprintf("field '%s' (%s)", e.Field, e.What)
	}
	if e.Size <= 0 {
		return fmt.Sprintf("%s exceeds the limit of %d bytes", what, e.Limit)
	}
	return fmt.Sprintf("%s is %d bytes, over the limit of %d bytes", what, e.Size, e.Limit)
}

// Unwrap makes errors.Is(err, ErrTooLarge) true.
func (e *TooLargeError) Unwrap() error { return ErrTooLarge }

// CheckJob refuses a job whose record would be larger than l.Job bytes
// (a new job, with the fields the server set at enqueue). field is "" or
// the job's place in a batch ("jobs[3]").
func (l PayloadLimits) CheckJob(j *Job, field string) error {
	size, fits, err := j.EncodedSize(int(l.Job))
	if err != nil || fits {
		return err
	}
	return &TooLargeError{Field: field, What: "job as stored", Limit: l.Job, Size: int64(size),
		Hint: fmt.Sprintf("Send a smaller job: a job may take %d bytes as stored (the NATS server's max_payload of %d "+
			"bytes less a reserve of %d for its result, errors and progress); pass large data by reference.",
			l.Job, l.MaxPayload, l.Reserve)}
}

// CheckResult reports whether an ack's result is within l.Result as
// stored: such a result always lands. A larger one lands if its record has
// room for it (CheckResultIn).
func (l PayloadLimits) CheckResult(result json.RawMessage) bool {
	_, fits := rawSize(result, l.Result)
	return fits
}

// CheckResultIn refuses the record j of a completed job, its result set,
// when it is larger than l.Record: the result is then larger than the
// room the rest of the job leaves, which is at least l.Result.
func (l PayloadLimits) CheckResultIn(j *Job) error {
	size, fits, err := j.EncodedSize(int(l.Record))
	if err != nil || fits {
		return err
	}
	result, _ := rawSize(j.Result, math.MaxInt64)
	room := max(l.Record-(int64(size)-result), 0)
	return &TooLargeError{Field: "result", What: "ack result as stored", Limit: room, Size: result,
		Hint: fmt.Sprintf("Send a smaller result: this job's record has room for %d bytes of result (any job for %d); "+
			"store a large result elsewhere and return a reference to it.", room, l.Result)}
}

// CheckError refuses a nack's error larger than l.Error as stored: e is
// the error as the server records it (its attempt and time set).
func (l PayloadLimits) CheckError(e JobError) error {
	b, err := json.Marshal(e)
	if err != nil {
		return err
	}
	if int64(len(b)) <= l.Error {
		return nil
	}
	return &TooLargeError{Field: "error", What: "nack error as stored", Limit: l.Error, Size: int64(len(b)),
		Hint: fmt.Sprintf("Send an error of at most %d bytes: shorten its message, details and backtrace.", l.Error)}
}

// CheckProgress refuses a job whose progress (data, message and last
// checkpoint together, as stored) would be larger than l.Progress.
func (l PayloadLimits) CheckProgress(j *Job) error {
	size := int64(jsonStringLen(j.ProgressMessage))
	for _, raw := range []json.RawMessage{j.ProgressData, j.LastCheckpoint} {
		n, _ := rawSize(raw, l.Progress)
		size += n
	}
	if size <= l.Progress {
		return nil
	}
	return &TooLargeError{Field: "progress", What: "progress data, message and checkpoint as stored",
		Limit: l.Progress, Size: size,
		Hint: fmt.Sprintf("Send less progress: a job keeps at most %d bytes of progress data, message and checkpoint "+
			"together; pass large state by reference.", l.Progress)}
}

// AppendError appends e to the errors history errs and drops the oldest
// entries while the history, as stored, is larger than limit; the newest
// entry is always kept (a nack's error is at most PayloadLimits.Error, a
// part of the limit). Repeated failures so never grow a record past its
// budget; each entry's attempt says which attempts remain.
func AppendError(errs []JobError, e JobError, limit int64) []JobError {
	errs = append(errs, e)
	sizes := make([]int64, len(errs))
	total := int64(2) // []
	for i := range errs {
		b, _ := json.Marshal(errs[i])
		sizes[i] = int64(len(b)) + 1 // the comma
		total += sizes[i]
	}
	drop := 0
	for total > limit && drop < len(errs)-1 {
		total -= sizes[drop]
		drop++
	}
	if drop == 0 {
		return errs
	}
	return append([]JobError(nil), errs[drop:]...)
}

// rawSize is the size of raw JSON as stored (compacted), and whether it
// is within limit. Raw JSON without white space is stored as it is, so
// only a large value that holds some is compacted to be measured.
func rawSize(raw json.RawMessage, limit int64) (int64, bool) {
	if len(raw) == 0 || string(raw) == "null" {
		return 0, true
	}
	if int64(len(raw)) <= limit || !needsCompact(raw) {
		return int64(len(raw)), int64(len(raw)) <= limit
	}
	var buf bytes.Buffer
	if json.Compact(&buf, raw) != nil {
		return int64(len(raw)), false
	}
	return int64(buf.Len()), int64(buf.Len()) <= limit
}

// jsonStringLen is the length of s written as a JSON string by the record
// encoder (appendString).
func jsonStringLen(s string) int {
	return len(appendString(make([]byte, 0, len(s)+2), s))
}
