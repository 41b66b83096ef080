package httpbind

import (
	"context"
	"net/http"

	"github.com/jetgate/jetgate/admission/ojs"
	"github.com/jetgate/jetgate/admission/ojs/wire"
)

// ExtBackpressure is the URI of the backpressure extension
// (ojs-backpressure.md).
const ExtBackpressure = "urn:ojs:ext:backpressure"

// Headers of the backpressure extension (ojs-backpressure.md 5.2, 7.2,
// 7.3 and ojs-backpressure.txt).
const (
	HeaderBlockTimeout      = wire.HeaderBlockTimeout
	HeaderQueueDepth        = wire.HeaderQueueDepth
	HeaderQueueMaxDepth     = wire.HeaderQueueMaxDepth
	HeaderQueueBound        = wire.HeaderQueueBound
	HeaderQueuePressure     = wire.HeaderQueuePressure
	HeaderQueueSizeBytes    = wire.HeaderQueueSizeBytes
	HeaderQueueMaxSizeBytes = wire.HeaderQueueMaxSizeBytes
)

const (
	queueConfigAdminPath = "/ojs/v1/admin/queues/{name}/config"
	queueConfigPath      = "/ojs/v1/queues/{name}/config"
	// maxBlockTimeoutSeconds bounds OJS-Block-Timeout; the backend caps
	// the wait further with its own maximum.
	// queueFullReason is details.reason of a 429 from a full queue: the
	// core spec's QUEUE_FULL code (ojs-backpressure.md 7.1).
)

// BackpressureBackend is what the queue config endpoints ask of a Backend.
// They are served only when the Backend implements it.
type BackpressureBackend interface {
	QueueConfig(ctx context.Context, name string) (*ojs.QueueConfig, error)
	// SetQueueBackpressure sets a queue's bound; nil returns it to the
	// server-wide default.
	SetQueueBackpressure(ctx context.Context, name string, bp *ojs.Backpressure) (*ojs.QueueConfig, error)
}

// backpressureRoutes are the queue config routes (ojs-backpressure.md 6.2;
// ojs-queue-config.md 9.1 path as an alias).
func (s *server) backpressureRoutes() []route {
	if _, ok := s.b.(BackpressureBackend); !ok {
		return nil
	}
	body := s.cfg.MaxBodyBytes
	return []route{
		{http.MethodGet, queueConfigAdminPath, s.getQueueConfig, body},
		{http.MethodPut, queueConfigAdminPath, s.putQueueConfig, body},
		{http.MethodGet, queueConfigPath, s.getQueueConfig, body},
		{http.MethodPut, queueConfigPath, s.putQueueConfig, body},
	}
}

// getQueueConfig is GET .../queues/{name}/config: the effective bound.
func (s *server) getQueueConfig(w http.ResponseWriter, r *http.Request) {
	name, err := pathQueue(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	cfg, err := s.b.(BackpressureBackend).QueueConfig(r.Context(), name)
	s.answer(w, r, cfg, err)
}

// putQueueConfig is PUT .../queues/{name}/config. It accepts the
// extension's {"backpressure":{max_depth, max_size_bytes, strategy,
// warning_threshold, tenant_key, tenant_max_depth, count_active}}, the .txt's
// {"capacity":{max_depth, max_size_bytes, on_overflow}} and the queue
// config spec's top-level {max_size, max_size_bytes, overflow_policy}.
// {"backpressure": null} returns the queue to the server-wide default.
func (s *server) putQueueConfig(w http.ResponseWriter, r *http.Request) {
	name, err := pathQueue(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	o, err := readObject(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	bp, err := decodeBackpressure(o)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	cfg, err := s.b.(BackpressureBackend).SetQueueBackpressure(r.Context(), name, bp)
	s.answer(w, r, cfg, err)
}

var decodeBackpressure = wire.DecodeBackpressure

// enqueueContext prepares an enqueue's context: the OJS-Block-Timeout
// header (seconds, fractions allowed) and a pressure report for the
// response headers.
func enqueueContext(r *http.Request) (context.Context, *ojs.PressureReport, error) {
	return wire.EnqueueContext(r.Context(), r.Header.Get(keyBlockTimeout))
}

// writePressure sets the X-OJS-Queue-* headers of the most pressed
// bounded queue an enqueue touched (7.3: on every successful enqueue into
// a bounded queue).
func writePressure(w http.ResponseWriter, rep *ojs.PressureReport) {
	if rep == nil {
		return
	}
	if p, ok := rep.Highest(); ok {
		wire.SetPressureHeaders(w.Header(), p)
	}
}
