package metrics_test

import (
	"context"
	"fmt"
	"io"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/jetgate/jetgate/admission/metrics"
)

func Example() {
	m, err := metrics.New(metrics.Config{ServiceName: "jetgate", InstanceID: "example"})
	if err != nil {
		panic(err)
	}
	defer m.Shutdown(context.Background())

	ctx := context.Background()
	m.JobEnqueued(ctx, "email", "email.send")
	m.JobCompleted(ctx, "email", "email.send", 120*time.Millisecond)
	m.SetQueueDepthFunc(func(context.Context) map[string]int64 { return map[string]int64{"email": 7} })

	// Serve m.Handler() on /metrics; here we scrape it once.
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	for _, line := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(line, "ojs_job_enqueued_total") || strings.HasPrefix(line, "ojs_job_completed_total") ||
			strings.HasPrefix(line, "ojs_queue_depth{") || strings.HasPrefix(line, "ojs_job_duration_seconds_count") {
			fmt.Println(line)
		}
	}
	// Output:
	// ojs_job_completed_total{queue="email",type="email.send"} 1
	// ojs_job_duration_seconds_count{queue="email",state="completed",type="email.send"} 1
	// ojs_job_enqueued_total{queue="email",type="email.send"} 1
	// ojs_queue_depth{queue="email",state="available"} 7
}
