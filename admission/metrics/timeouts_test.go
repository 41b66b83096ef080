package metrics

import (
	"context"
	"testing"
	"time"
)

// ojs-timeouts.md 11.2: the four timeout instruments, with their labels.
func TestTimeoutInstruments(t *testing.T) {
	t.Parallel()
	m := setup(t, Config{InstanceID: "i-1"})
	ctx := context.Background()
	m.JobTimedOut(ctx, "media", "video.transcode", "execution")
	m.JobTimedOut(ctx, "media", "video.transcode", "execution")
	m.JobTimedOut(ctx, "media", "video.transcode", "enqueue_ttl")
	m.JobExecuted(ctx, "media", "video.transcode", "timeout", 3*time.Second)
	m.JobExecuted(ctx, "media", "video.transcode", "completed", 200*time.Millisecond)
	m.JobEnqueueWait(ctx, "media", 40*time.Millisecond)
	m.SetHeartbeatAgeFunc(func(context.Context) map[string]time.Duration {
		return map[string]time.Duration{"media": 1500 * time.Millisecond}
	})
	m.ProgressUpdated(ctx, "media", "video.transcode", 0)
	m.ProgressUpdated(ctx, "media", "video.transcode", 300)
	requireLines(t, scrape(t, m),
		`ojs_progress_updates_total{queue="media",type="video.transcode"} 2`,
		`ojs_progress_checkpoint_size_bytes_count{type="video.transcode"} 1`,
		`ojs_progress_checkpoint_size_bytes_sum{type="video.transcode"} 300`,
		"# TYPE ojs_job_timeout_count_total counter",
		`ojs_job_timeout_count_total{queue="media",timeout_kind="execution",type="video.transcode"} 2`,
		`ojs_job_timeout_count_total{queue="media",timeout_kind="enqueue_ttl",type="video.transcode"} 1`,
		"# TYPE ojs_job_execution_duration_seconds histogram",
		`ojs_job_execution_duration_seconds_count{outcome="timeout",queue="media",type="video.transcode"} 1`,
		`ojs_job_execution_duration_seconds_sum{outcome="completed",queue="media",type="video.transcode"} 0.2`,
		`ojs_job_enqueue_wait_time_seconds_count{queue="media"} 1`,
		"# TYPE ojs_job_heartbeat_age_seconds gauge",
		`ojs_job_heartbeat_age_seconds{queue="media"} 1.5`,
	)
	var nilM *Metrics
	nilM.JobTimedOut(ctx, "q", "t", "stalled")
	nilM.JobExecuted(ctx, "q", "t", "stalled", time.Second)
	nilM.JobEnqueueWait(ctx, "q", time.Second)
	nilM.SetHeartbeatAgeFunc(nil)
	nilM.ProgressUpdated(ctx, "q", "t", 10)
}
