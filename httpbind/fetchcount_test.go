package httpbind

import (
	"net/http"
	"testing"
)

// An SDK asks for as many jobs as it has free handler slots (spec/README.md,
// what the official clients send): a count above the server's cap is served
// up to the cap, never refused (issue 16). Only count < 1 or a non-integer is
// 400 (TestFetch_Invalid_10_1).
func TestFetch_CountAboveCapServedUpToCap(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		cfg   Config
		body  string
		count int
	}{
		{Config{}, `{"queues":["a"],"count":5000}`, DefaultMaxFetchCount},
		{Config{}, `{"queues":["a"],"count":1000}`, 1000},
		{Config{MaxFetchCount: 100}, `{"queues":["a"],"count":101}`, 100},
		{Config{MaxFetchCount: 100}, `{"queues":["a"],"count":99999999999999999999999}`, 100},
		{Config{MaxFetchCount: 100}, `{"queues":["a"],"count":7}`, 7},
	} {
		b := setup(t, tt.cfg)
		b.do(t, http.MethodPost, "/ojs/v1/workers/fetch", tt.body, nil).wantStatus(t, http.StatusOK)
		if got := b.fake.fetchReq.Count; got != tt.count {
			t.Errorf("%s with cap %d: backend asked for %d, want %d", tt.body, tt.cfg.MaxFetchCount, got, tt.count)
		}
	}
	d := setup(t, Config{}).do(t, http.MethodPost, "/ojs/v1/workers/fetch", `{"queues":["a"],"count":-99999999999999999999999}`, nil).
		wantError(t, http.StatusBadRequest, "invalid_request", false)
	if d["field"] != "count" {
		t.Errorf("details = %v, want field count", d)
	}
}
