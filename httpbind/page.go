package httpbind

import "github.com/jetgate/jetgate/admission/ojs/wire"

// Paging is package wire's (ojs-http-binding.md 17.1), shared with the
// NATS binding.
var (
	parsePage    = wire.ParsePage
	encodeCursor = wire.EncodeCursor
	decodeCursor = wire.DecodeCursor
)
