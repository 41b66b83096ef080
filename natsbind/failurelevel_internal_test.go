package natsbind

import (
	"errors"
	"fmt"
	"log/slog"
	"testing"

	"github.com/jetgate/jetgate/admission/ojs"
)

// Issue 31: the 503 of a server shutting down is an expected answer,
// logged at Info; other 5xx answers stay at Error.
func TestFailureLevel(t *testing.T) {
	t.Parallel()
	if got := failureLevel(fmt.Errorf("wait for room in queue q: %w", ojs.ErrShuttingDown)); got != slog.LevelInfo {
		t.Fatalf("shutting down logged at %v, want Info", got)
	}
	if got := failureLevel(errors.New("boom")); got != slog.LevelError {
		t.Fatalf("a failure logged at %v, want Error", got)
	}
}
