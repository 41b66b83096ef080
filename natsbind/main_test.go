package natsbind_test

import (
	"testing"

	"go.uber.org/goleak"
)

// Every request goroutine, fetch wait and the micro service stop with
// jetgate (STYLE item 14).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
