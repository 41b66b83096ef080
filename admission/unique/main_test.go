package unique_test

import (
	"testing"

	"go.uber.org/goleak"
)

// Every goroutine the Service starts must stop with Stop.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
