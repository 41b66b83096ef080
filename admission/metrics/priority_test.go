package metrics

import (
	"context"
	"testing"
	"time"
)

// ojs-priority.md (metrics): a first start's wait is recorded by queue and
// priority. Each (queue, priority) pair keeps a series of its own, also
// now that the attribute sets come from a cache.
func TestWaitByPriority(t *testing.T) {
	t.Parallel()
	m := setup(t, Config{InstanceID: "i-1"})
	ctx := context.Background()
	m.JobWaitedByPriority(ctx, "email", 3, 100*time.Millisecond)
	m.JobWaitedByPriority(ctx, "email", 3, 300*time.Millisecond)
	m.JobWaitedByPriority(ctx, "email", 7, 50*time.Millisecond)
	m.JobWaitedByPriority(ctx, "sms", 3, 20*time.Millisecond)
	requireLines(t, scrape(t, m),
		`ojs_job_wait_duration_by_priority_seconds_count{priority="3",queue="email"} 2`,
		`ojs_job_wait_duration_by_priority_seconds_sum{priority="3",queue="email"} 0.4`,
		`ojs_job_wait_duration_by_priority_seconds_count{priority="7",queue="email"} 1`,
		`ojs_job_wait_duration_by_priority_seconds_count{priority="3",queue="sms"} 1`,
	)
}
