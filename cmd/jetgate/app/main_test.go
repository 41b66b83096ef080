package app_test

import (
	"testing"

	"go.uber.org/goleak"
)

// A stopped jetgate leaves no goroutine behind: HTTP server, admission,
// NATS connection and embedded server all stop (STYLE item 14).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
