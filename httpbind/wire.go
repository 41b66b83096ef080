package httpbind

import (
	"net/http"

	"github.com/jetgate/jetgate/admission/ojs"
	"github.com/jetgate/jetgate/admission/ojs/wire"
)

// The request decoders and validators are package wire's, shared with the
// NATS binding (no rule lives in an adapter); httpbind only extracts them
// from the path, query and body. These names keep its code short.
type object = wire.Object

const (
	maxQueueNameLen        = wire.MaxQueueNameLen
	maxVisibilityTimeoutMs = wire.MaxVisibilityTimeoutMs
	maxIDLen               = wire.MaxIDLen
	maxQueueWeight         = wire.MaxQueueWeight
)

var (
	parseObject    = wire.ParseObject
	stringArray    = wire.StringArray
	describe       = wire.Describe
	checkQueueName = wire.CheckQueueName
	dedupe         = wire.Dedupe
	onlyFields     = wire.OnlyFields
	short          = wire.Short
	prefixField    = wire.PrefixField
	prefixed       = func(err error, prefix string) error { return wire.Prefixed(err, prefix) }
)

// decodeBody reads the request body and decodes it with dec.
func decodeBody[T any](r *http.Request, dec func([]byte) (T, error)) (T, error) {
	b, err := readBody(r)
	if err != nil {
		var zero T
		return zero, err
	}
	return dec(b)
}

func (s *server) decodeFetch(r *http.Request) (ojs.FetchRequest, error) {
	return decodeBody(r, func(b []byte) (ojs.FetchRequest, error) { return wire.DecodeFetch(b, s.cfg.MaxFetchCount) })
}

func decodeAck(r *http.Request) (ojs.AckRequest, error)   { return decodeBody(r, wire.DecodeAck) }
func decodeNack(r *http.Request) (ojs.NackRequest, error) { return decodeBody(r, wire.DecodeNack) }
func decodeHeartbeat(r *http.Request) (ojs.HeartbeatRequest, error) {
	return decodeBody(r, wire.DecodeHeartbeat)
}

var decodeWorkerInfo = wire.DecodeWorkerInfo

var parseAdminPage = wire.ParseAdminPage

const adminMaxPerPage = wire.AdminMaxPerPage
