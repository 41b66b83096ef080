package ojs

import (
	"encoding/json"
	"time"
)

// WorkerDrain is the drain phase of graceful shutdown
// (ojs-graceful-shutdown.md 5.2): the worker fetches nothing and waits for
// its active jobs. The worker protocol calls the same phase "terminate";
// a heartbeat answer says "terminate" for it (spec/README.md decision 4).
const WorkerDrain = "drain"

// workerRanks orders the lifecycle states: a worker only moves forward,
// and the state that counts is the furthest of what the worker reported
// and what an operator directed (ojs-worker-protocol.md 2.3).
var workerRanks = map[string]int{WorkerRunning: 0, WorkerQuiet: 1, WorkerDrain: 2, WorkerTerminate: 3}

// ValidWorkerState tells whether s is a state a worker may report.
func ValidWorkerState(s string) bool { _, ok := workerRanks[s]; return ok }

// FurthestWorkerState is the later of two lifecycle states; "" counts as
// running.
func FurthestWorkerState(a, b string) string {
	if a == "" {
		a = WorkerRunning
	}
	if workerRanks[b] > workerRanks[a] {
		return b
	}
	return a
}

// HeartbeatState is state as a heartbeat answer says it: one of running,
// quiet, terminate (the official SDKs know no other).
func HeartbeatState(state string) string {
	switch state {
	case WorkerDrain:
		return WorkerTerminate
	case "":
		return WorkerRunning
	}
	return state
}

// WorkerInfo is what a worker says about itself in a heartbeat
// (ojs-worker-protocol.md 3.1, 4.2); zero fields are unsaid.
type WorkerInfo struct {
	State       string
	ActiveJobs  int // -1: unsaid
	Hostname    string
	PID         int
	Queues      []string
	Concurrency int
	Labels      []string
	StartedAt   *Time
	Version     string
	Metadata    json.RawMessage
	// Pool is the worker pool the worker belongs to
	// (ojs-fair-scheduling.md 6.2).
	Pool string
}

// Worker is one worker as the registry knows it (ojs-admin-api.md 9.1).
type Worker struct {
	ID       string   `json:"id"`
	Hostname string   `json:"hostname,omitempty"`
	PID      int      `json:"pid,omitempty"`
	Pool     string   `json:"pool,omitempty"`
	Queues   []string `json:"queues"`
	// State is the state that counts: the furthest of ReportedState and
	// Directive.
	State         string `json:"state"`
	ReportedState string `json:"reported_state"`
	// Directive is an operator's quiet or terminate, answered to the
	// worker's heartbeats until it complies.
	Directive       string          `json:"directive,omitempty"`
	Concurrency     int             `json:"concurrency,omitempty"`
	ActiveJobs      int             `json:"active_jobs"`
	ActiveJobIDs    []string        `json:"active_job_ids,omitempty"`
	Labels          []string        `json:"labels,omitempty"`
	Version         string          `json:"version,omitempty"`
	Metadata        json.RawMessage `json:"metadata,omitempty"`
	StartedAt       *Time           `json:"started_at,omitempty"`
	FirstSeenAt     *Time           `json:"first_seen_at"`
	LastSeenAt      *Time           `json:"last_seen_at"`
	LastHeartbeatAt *Time           `json:"last_heartbeat_at,omitempty"`
	// Stale: not seen for longer than the heartbeat timeout (computed
	// when read, never stored).
	Stale bool `json:"stale"`
}

// Clone copies w deeply enough to change it.
func (w *Worker) Clone() *Worker {
	c := *w
	c.Queues = append([]string(nil), w.Queues...)
	c.ActiveJobIDs = append([]string(nil), w.ActiveJobIDs...)
	c.Labels = append([]string(nil), w.Labels...)
	return &c
}

// WorkerPage is one page of GET /ojs/v1/admin/workers.
type WorkerPage struct {
	Items   []Worker       `json:"items"`
	Summary map[string]int `json:"summary"`
	Total   int            `json:"-"`
}

// WorkerHealth is GET /ojs/v1/workers/{id}/health.
type WorkerHealth struct {
	WorkerID string `json:"worker_id"`
	// Status is "healthy" (seen within the heartbeat timeout) or "stale".
	Status string `json:"status"`
	// Ready tells whether the worker is given jobs: running and not stale
	// (ojs-graceful-shutdown.md GS-R004).
	Ready           bool   `json:"ready"`
	State           string `json:"state"`
	ReportedState   string `json:"reported_state"`
	Directive       string `json:"directive,omitempty"`
	ActiveJobs      int    `json:"active_jobs"`
	LastSeenAt      *Time  `json:"last_seen_at"`
	LastHeartbeatAt *Time  `json:"last_heartbeat_at,omitempty"`
	// SecondsSinceSeen is how long ago the worker was last seen.
	SecondsSinceSeen float64 `json:"seconds_since_seen"`
}

// HealthOf is w's health at now, stale after staleAfter.
func (w *Worker) HealthOf(now time.Time) WorkerHealth {
	h := WorkerHealth{WorkerID: w.ID, Status: "healthy", State: w.State, ReportedState: w.ReportedState,
		Directive: w.Directive, ActiveJobs: w.ActiveJobs, LastSeenAt: w.LastSeenAt, LastHeartbeatAt: w.LastHeartbeatAt}
	if w.Stale {
		h.Status = "stale"
	}
	h.Ready = !w.Stale && w.State == WorkerRunning
	if w.LastSeenAt != nil {
		h.SecondsSinceSeen = now.Sub(w.LastSeenAt.Time).Seconds()
	}
	return h
}

// Pool is a worker pool (ojs-fair-scheduling.md 6.1, 10.1): a worker
// group under the fair scheduling extension's name, with what its workers
// do now.
type Pool struct {
	WorkerGroup
	ActiveWorkers int `json:"active_workers"`
	ActiveJobs    int `json:"active_jobs"`
}

// QueueDispatch is one queue of GET /ojs/v1/admin/scheduling/stats.
type QueueDispatch struct {
	Name            string  `json:"name"`
	DispatchCount1m int64   `json:"dispatch_count_1m"`
	DispatchRatio1m float64 `json:"dispatch_ratio_1m"`
	AvgWaitMs       int64   `json:"avg_wait_ms"`
	ActiveJobs      int64   `json:"active_jobs"`
}

// SchedulingStats is GET /ojs/v1/admin/scheduling/stats.
type SchedulingStats struct {
	Queues []QueueDispatch `json:"queues"`
	Window string          `json:"window"`
}
