package ojs

import (
	"encoding/json"
	"errors"
	"math"
	"strconv"
)

// ProgressUpdate is a worker's PUT /ojs/v1/jobs/{id}/progress
// (ojs-progress.md 6): the fraction done, a human-readable message,
// structured data, and a checkpoint to resume from.
type ProgressUpdate struct {
	Progress *float64
	// Message is what the worker says it is doing ("sending batch 3 of
	// 7"); nil when the update sets none.
	Message    *string
	Data       json.RawMessage
	Checkpoint json.RawMessage
}

// MaxProgressDataBytes bounds data and checkpoint (the spec recommends
// 4 KB for data; checkpoints get the same room times four).
const MaxProgressDataBytes = 16 << 10

// MaxProgressMessageBytes bounds a progress message.
const MaxProgressMessageBytes = 4 << 10

// progressFields are the fields of a progress update.
var progressFields = map[string]bool{"progress": true, "message": true, "data": true, "checkpoint": true}

// ParseProgressUpdate reads a progress update body: at least one of
// progress (any number, clamped to [0, 1] per PRG-002, never refused),
// message (a string, as the SDKs send beside progress) and data (an
// object), and an optional checkpoint object.
func ParseProgressUpdate(raw []byte) (*ProgressUpdate, error) {
	o, err := decodeObject(raw, "")
	if err != nil {
		return nil, err
	}
	for k := range o.m {
		if !progressFields[k] {
			return nil, &ValidationError{Field: k, Rule: "one of progress, message, data, checkpoint", Received: "an unknown field"}
		}
	}
	u := &ProgressUpdate{}
	if c := o.cand("progress"); c.raw != nil {
		f, ok := clampedFraction(c.raw)
		if !ok {
			return nil, wrongKind(c, "a number from 0.0 to 1.0 (others are clamped)")
		}
		u.Progress = &f
	}
	if c := o.cand("message"); c.raw != nil {
		s, ok := stringValue(c.raw)
		if !ok {
			return nil, wrongKind(c, "a string")
		}
		if len(s) > MaxProgressMessageBytes {
			return nil, progressTooLarge("message", "progress message", MaxProgressMessageBytes, len(s))
		}
		u.Message = &s
	}
	for _, f := range []struct {
		name string
		dst  *json.RawMessage
	}{{"data", &u.Data}, {"checkpoint", &u.Checkpoint}} {
		c := o.cand(f.name)
		if c.raw == nil {
			continue
		}
		if c.raw[0] != '{' {
			return nil, wrongKind(c, "a JSON object")
		}
		if len(c.raw) > MaxProgressDataBytes {
			return nil, progressTooLarge(f.name, "progress "+f.name, MaxProgressDataBytes, len(c.raw))
		}
		*f.dst = c.raw
	}
	if u.Progress == nil && u.Data == nil && u.Message == nil {
		return nil, &ValidationError{Field: "progress", Rule: "progress, message or data (at least one)",
			Message: "a progress update needs 'progress' (0.0 to 1.0), 'message' (a string) or 'data' (an object)"}
	}
	return u, nil
}

// progressTooLarge is the 413 of a progress field over its limit (issue
// 31: every size limit answers 413, naming the limit and the size). The
// record budget bounds the fields a job keeps together too
// (PayloadLimits.CheckProgress).
func progressTooLarge(field, what string, limit, size int) error {
	return &TooLargeError{Field: field, What: what, Limit: int64(limit), Size: int64(size),
		Hint: "Send less progress: pass large state by reference (a progress message takes at most 4 KiB, data and a checkpoint 16 KiB each)."}
}

// clampedFraction reads a JSON number clamped to [0, 1] (PRG-002); a number
// too large for a float64 clamps too. ok is false for anything else.
func clampedFraction(raw json.RawMessage) (float64, bool) {
	if !isNumber(raw) {
		return 0, false
	}
	f, err := strconv.ParseFloat(string(raw), 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) || math.IsNaN(f) {
		return 0, false
	}
	return min(max(f, 0), 1), true
}

// ProgressStatus is GET /ojs/v1/jobs/{id}/progress (ojs-progress.md 7.1):
// progress, message and data are null until reported.
type ProgressStatus struct {
	JobID     string          `json:"job_id"`
	State     State           `json:"state"`
	Progress  *float64        `json:"progress"`
	Message   *string         `json:"message"`
	Data      json.RawMessage `json:"data"`
	UpdatedAt *Time           `json:"updated_at"`
	// LastCheckpoint is the checkpoint the next attempt resumes from.
	LastCheckpoint json.RawMessage `json:"last_checkpoint,omitempty"`
}

// ProgressOf returns the progress status of j.
func ProgressOf(j *Job) *ProgressStatus {
	st := &ProgressStatus{JobID: j.ID, State: j.State, Progress: j.Progress, UpdatedAt: j.ProgressUpdatedAt,
		LastCheckpoint: j.LastCheckpoint}
	if j.ProgressMessage != "" {
		msg := j.ProgressMessage
		st.Message = &msg
	}
	if len(j.ProgressData) > 0 {
		st.Data = j.ProgressData
	} else {
		st.Data = json.RawMessage("null")
	}
	return st
}
