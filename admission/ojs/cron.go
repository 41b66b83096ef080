package ojs

import "encoding/json"

// Cron overlap policies (L2-CRON-003, ojs-extension-interactions.md 13):
// skip a tick while the job of the previous tick has not finished (the
// default), or allow it to run beside it.
const (
	CronOverlapSkip  = "skip"
	CronOverlapAllow = "allow"
)

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
	Status        string          `json:"status,omitempty"`
	CreatedAt     *Time           `json:"created_at,omitempty"`
	NextRunAt     *Time           `json:"next_run_at,omitempty"`
	LastRunAt     *Time           `json:"last_run_at,omitempty"`
	// LastJobID is the job enqueued by the last tick that ran.
	LastJobID string `json:"last_job_id,omitempty"`
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
