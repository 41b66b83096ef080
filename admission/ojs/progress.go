package ojs

import (
	"encoding/json"
	"math"
)

// ProgressUpdate is a worker's PUT /ojs/v1/jobs/{id}/progress
// (ojs-progress.md 6): the fraction done, structured data, and a
// checkpoint to resume from.
type ProgressUpdate struct {
	Progress   *float64
	Data       json.RawMessage
	Checkpoint json.RawMessage
}

// MaxProgressDataBytes bounds data and checkpoint (the spec recommends
// 4 KB for data; checkpoints get the same room times four).
const MaxProgressDataBytes = 16 << 10

// ParseProgressUpdate reads a progress update body: at least one of
// progress (a number, clamped to [0, 1] per PRG-002) and data (an object),
// and an optional checkpoint object.
func ParseProgressUpdate(raw []byte) (*ProgressUpdate, error) {
	o, err := decodeObject(raw, "")
	if err != nil {
		return nil, err
	}
	for k := range o.m {
		if k != "progress" && k != "data" && k != "checkpoint" {
			return nil, &ValidationError{Field: k, Rule: "one of progress, data, checkpoint", Received: "an unknown field"}
		}
	}
	u := &ProgressUpdate{}
	if c := o.cand("progress"); c.raw != nil {
		var f float64
		if !isNumber(c.raw) || json.Unmarshal(c.raw, &f) != nil || math.IsNaN(f) {
			return nil, wrongKind(c, "a number from 0.0 to 1.0")
		}
		f = min(max(f, 0), 1)
		u.Progress = &f
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
			return nil, &ValidationError{Field: f.name, Rule: "at most 16 KiB of JSON", Received: "a larger object"}
		}
		*f.dst = c.raw
	}
	if u.Progress == nil && u.Data == nil {
		return nil, &ValidationError{Field: "progress", Rule: "progress or data (at least one)",
			Message: "a progress update needs 'progress' (0.0 to 1.0) or 'data' (an object), or both"}
	}
	return u, nil
}

// ProgressStatus is GET /ojs/v1/jobs/{id}/progress (ojs-progress.md 7.1):
// progress and data are null until reported.
type ProgressStatus struct {
	JobID     string          `json:"job_id"`
	State     State           `json:"state"`
	Progress  *float64        `json:"progress"`
	Data      json.RawMessage `json:"data"`
	UpdatedAt *Time           `json:"updated_at"`
	// LastCheckpoint is the checkpoint the next attempt resumes from.
	LastCheckpoint json.RawMessage `json:"last_checkpoint,omitempty"`
}

// ProgressOf returns the progress status of j.
func ProgressOf(j *Job) *ProgressStatus {
	st := &ProgressStatus{JobID: j.ID, State: j.State, Progress: j.Progress, UpdatedAt: j.ProgressUpdatedAt,
		LastCheckpoint: j.LastCheckpoint}
	if len(j.ProgressData) > 0 {
		st.Data = j.ProgressData
	} else {
		st.Data = json.RawMessage("null")
	}
	return st
}
