package httpbind

import (
	"context"

	"github.com/jetgate/jetgate/admission/ojs"
	"github.com/jetgate/jetgate/admission/ojs/wire"
)

// Backend is everything the HTTP binding asks of the layer below. The
// admission service implements it; httpbind never touches JetStream itself.
// Errors are the ojs sentinels and typed errors, mapped by writeError.
type Backend interface {
	wire.Core
	// Ready reports whether the process can serve (GET /ready); it must
	// be cheap, as probes call it often.
	Ready(ctx context.Context) ojs.Readiness
}
