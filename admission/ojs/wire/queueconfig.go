package wire

import (
	"encoding/json"
	"errors"
	"math"

	"github.com/jetgate/jetgate/admission/ojs"
)

// Field prefixes and bounds of a queue config body.
const (
	backpressureFieldPrefix = "backpressure."
	capacityFieldPrefix     = "capacity."
	maxBoundValue           = math.MaxInt64 / 2
)

// DecodeBackpressure reads the body of PUT .../queues/{name}/config: it
// reads one of the three accepted shapes; giving two
// is refused so that no value is silently ignored.
func DecodeBackpressure(o Object) (*ojs.Backpressure, error) {
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
		return nil, Invalid("backpressure", "an Object (or capacity, or max_size / max_size_bytes / overflow_policy)", "nothing")
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

// decodeBound reads a bound Object whose depth and strategy fields are
// named depthField and strategyField.
func decodeBound(raw json.RawMessage, prefix, depthField, strategyField string) (*ojs.Backpressure, error) {
	o, err := ParseObject(raw)
	if err != nil {
		return nil, Prefixed(err, prefix)
	}
	var bp ojs.Backpressure
	if bp.MaxDepth, err = o.Integer(depthField, 0, 0, maxBoundValue); err != nil {
		return nil, Prefixed(err, prefix)
	}
	if bp.MaxSizeBytes, err = o.Integer("max_size_bytes", 0, 0, maxBoundValue); err != nil {
		return nil, Prefixed(err, prefix)
	}
	if bp.TenantMaxDepth, err = o.Integer("tenant_max_depth", 0, 0, maxBoundValue); err != nil {
		return nil, Prefixed(err, prefix)
	}
	if bp.Strategy, err = o.Str(strategyField, false); err != nil {
		return nil, Prefixed(err, prefix)
	}
	if bp.TenantKey, err = o.Str("tenant_key", false); err != nil {
		return nil, Prefixed(err, prefix)
	}
	if v, err := o.Boolean("count_active"); err != nil {
		return nil, Prefixed(err, prefix)
	} else if v != nil {
		bp.CountActive = *v
	}
	if v, ok := o.Get("warning_threshold"); ok {
		if err := json.Unmarshal(v, &bp.WarningThreshold); err != nil || bp.WarningThreshold <= 0 || bp.WarningThreshold > 1 {
			return nil, Invalid(prefix+"warning_threshold", "a number above 0.0 and at most 1.0", Describe(v))
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
