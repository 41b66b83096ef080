package httpbind

import (
	"context"
	"encoding/json"
	"errors"
	"math"
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
	queueConfigAdminPath    = "/ojs/v1/admin/queues/{name}/config"
	queueConfigPath         = "/ojs/v1/queues/{name}/config"
	backpressureFieldPrefix = "backpressure."
	capacityFieldPrefix     = "capacity."
	// maxBlockTimeoutSeconds bounds OJS-Block-Timeout; the backend caps
	// the wait further with its own maximum.
	maxBlockTimeoutSeconds = 24 * 60 * 60
	maxBoundValue          = math.MaxInt64 / 2
	// queueFullReason is details.reason of a 429 from a full queue: the
	// core spec's QUEUE_FULL code (ojs-backpressure.md 7.1).
	queueFullReason = "QUEUE_FULL"
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

// decodeBackpressure reads one of the three accepted shapes; giving two
// is refused so that no value is silently ignored.
func decodeBackpressure(o object) (*ojs.Backpressure, error) {
	raw, hasBP := o["backpressure"]
	_, hasCap := o.Get("capacity")
	_, hasFlat := o.Get("max_size")
	if _, ok := o.Get("overflow_policy"); ok {
		hasFlat = true
	}
	if _, ok := o.Get("max_size_bytes"); ok {
		hasFlat = true
	}
	shapes := 0
	for _, b := range []bool{hasBP, hasCap, hasFlat} {
		if b {
			shapes++
		}
	}
	switch {
	case shapes == 0:
		return nil, invalid("backpressure", "an object (or capacity, or max_size / max_size_bytes / overflow_policy)", "nothing")
	case shapes > 1:
		return nil, &ojs.ValidationError{Field: "backpressure", Rule: "one configuration shape",
			Message: "give backpressure, capacity or the top-level max_size fields, not several"}
	case hasBP && string(raw) == "null":
		return nil, nil
	case hasBP:
		return decodeBound(raw, backpressureFieldPrefix, "max_depth", "strategy")
	case hasCap:
		raw, _ := o.Get("capacity")
		return decodeBound(raw, capacityFieldPrefix, "max_depth", "on_overflow")
	}
	b, _ := json.Marshal(o)
	return decodeBound(b, "", "max_size", "overflow_policy")
}

// decodeBound reads a bound object whose depth and strategy fields are
// named depthField and strategyField.
func decodeBound(raw json.RawMessage, prefix, depthField, strategyField string) (*ojs.Backpressure, error) {
	o, err := parseObject(raw)
	if err != nil {
		return nil, prefixed(err, prefix)
	}
	var bp ojs.Backpressure
	if bp.MaxDepth, err = o.Integer(depthField, 0, 0, maxBoundValue); err != nil {
		return nil, prefixed(err, prefix)
	}
	if bp.MaxSizeBytes, err = o.Integer("max_size_bytes", 0, 0, maxBoundValue); err != nil {
		return nil, prefixed(err, prefix)
	}
	if bp.TenantMaxDepth, err = o.Integer("tenant_max_depth", 0, 0, maxBoundValue); err != nil {
		return nil, prefixed(err, prefix)
	}
	if bp.Strategy, err = o.Str(strategyField, false); err != nil {
		return nil, prefixed(err, prefix)
	}
	if bp.TenantKey, err = o.Str("tenant_key", false); err != nil {
		return nil, prefixed(err, prefix)
	}
	if v, err := o.Boolean("count_active"); err != nil {
		return nil, prefixed(err, prefix)
	} else if v != nil {
		bp.CountActive = *v
	}
	if v, ok := o.Get("warning_threshold"); ok {
		if err := json.Unmarshal(v, &bp.WarningThreshold); err != nil || bp.WarningThreshold <= 0 || bp.WarningThreshold > 1 {
			return nil, invalid(prefix+"warning_threshold", "a number above 0.0 and at most 1.0", describe(v))
		}
	}
	if err := bp.Validate(prefix); err != nil {
		if ve, ok := errors.AsType[*ojs.ValidationError](err); ok && ve.Field == prefix+"strategy" {
			ve.Field = prefix + strategyField
		}
		return nil, err
	}
	return &bp, nil
}

// enqueueContext prepares an enqueue's context: the OJS-Block-Timeout
// header (seconds, fractions allowed) and a pressure report for the
// response headers.
func enqueueContext(r *http.Request) (context.Context, *ojs.PressureReport, error) {
	return wire.EnqueueContext(r.Context(), r.Header.Get(HeaderBlockTimeout))
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
