package ojs

import "encoding/json"

// Cron overlap policies (L2-CRON-003, ojs-extension-interactions.md 13,
// openapi.yaml CronJob.overlap_policy): what a tick does while the job of
// the previous tick that ran has not finished. Skip (the default) enqueues
// nothing; allow (alias queue) enqueues beside it; cancel (alias replace)
// cancels it and enqueues the new one. A definition answers the name the
// client sent; CronOverlapMode gives the behaviour.
const (
	CronOverlapSkip    = "skip"
	CronOverlapAllow   = "allow"
	CronOverlapQueue   = "queue"
	CronOverlapCancel  = "cancel"
	CronOverlapReplace = "replace"
)

// CronOverlapMode is the behaviour of an overlap policy: CronOverlapSkip,
// CronOverlapAllow or CronOverlapCancel ("" for a policy that is none of
// them; "" as policy is the default, skip).
func CronOverlapMode(policy string) string {
	switch policy {
	case "", CronOverlapSkip:
		return CronOverlapSkip
	case CronOverlapAllow, CronOverlapQueue:
		return CronOverlapAllow
	case CronOverlapCancel, CronOverlapReplace:
		return CronOverlapCancel
	}
	return ""
}

// CronJob is a cron job definition (ojs-http-binding.md 13): when to run
// (cron, timezone), what to enqueue on each tick (type, args, meta,
// options, the fields of an enqueue request), and the server's view of it.
type CronJob struct {
	Name          string          `json:"name"`
	Cron          string          `json:"cron"`
	Timezone      string          `json:"timezone"`
	OverlapPolicy string          `json:"overlap_policy"`
	Type          string          `json:"type"`
	Args          json.RawMessage `json:"args,omitempty"`
	Meta          json.RawMessage `json:"meta,omitempty"`
	Options       json.RawMessage `json:"options,omitempty"`
	// Enabled is false for a definition registered (or PUT) disabled:
	// its ticks are not scheduled. nil (every definition stored before
	// issue 32) is enabled.
	Enabled   *bool  `json:"enabled,omitempty"`
	Status    string `json:"status,omitempty"`
	CreatedAt *Time  `json:"created_at,omitempty"`
	NextRunAt *Time  `json:"next_run_at,omitempty"`
	LastRunAt *Time  `json:"last_run_at,omitempty"`
	// LastJobID is the job enqueued by the last tick that ran.
	LastJobID string `json:"last_job_id,omitempty"`
	// CancelJobID is the unfinished job the last tick that ran replaced
	// (overlap policy cancel): the tick's handler cancels it before it
	// enqueues LastJobID.
	CancelJobID string `json:"cancel_job_id,omitempty"`
	// CronField is the request field the expression came from, "cron"
	// (the binding) or "expression" (openapi.yaml), so that an error
	// about it names the field the client sent ("" reads as "cron").
	// Not stored.
	CronField string `json:"-"`
}

// CronPage is a page of GET /ojs/v1/cron (13.1).
type CronPage struct {
	CronJobs   []CronJob  `json:"cron_jobs"`
	Pagination Pagination `json:"pagination"`
}

// IsEnabled reports whether cj's ticks run.
func (cj *CronJob) IsEnabled() bool { return cj.Enabled == nil || *cj.Enabled }
