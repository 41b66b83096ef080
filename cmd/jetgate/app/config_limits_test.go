package app_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jetgate/jetgate/cmd/jetgate/app"
)

// TestStartRefusesARetentionPastMaxRetention (issue 31, noticed): a
// library user's Config is held to the range the flags enforce. A
// retention of 250 years would become a per-message TTL whose expiry
// overflows nats-server's int64 nanoseconds and lies in the past, so every
// finished record would go at once; Start refuses it before anything
// starts, and takes MaxRetention itself.
func TestStartRefusesARetentionPastMaxRetention(t *testing.T) {
	t.Parallel()
	for _, cfg := range []app.Config{
		{Retention: app.MaxRetention + time.Second},
		{DeadRetention: 250 * 365 * 24 * time.Hour},
	} {
		cfg.DataDir = t.TempDir()
		s, err := app.Start(context.Background(), cfg, nil)
		if err == nil {
			_ = s.Shutdown(context.Background())
			t.Fatalf("Start(%+v) served", cfg)
		}
		if !strings.Contains(err.Error(), "at most 876000h") {
			t.Errorf("err = %v, want one naming the maximum", err)
		}
	}
	if app.MaxRetention != 876000*time.Hour {
		t.Errorf("MaxRetention = %s, the docs say 876000h", app.MaxRetention)
	}
}
