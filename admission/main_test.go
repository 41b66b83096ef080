package admission_test

import (
	"testing"

	"go.uber.org/goleak"
)

// Every goroutine the Service starts must stop with Stop (STYLE item 14).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
