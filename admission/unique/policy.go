package unique

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/jetgate/jetgate/admission/ojs"
)

// Conflict strategies (ojs-unique-jobs.md 5).
const (
	OnConflictReject                = "reject"
	OnConflictReplace               = "replace"
	OnConflictReplaceExceptSchedule = "replace_except_schedule"
	OnConflictIgnore                = "ignore"
)

// DefaultStates are the states that count when a policy names none
// (ojs-unique-jobs.md 6.1).
var DefaultStates = []ojs.State{ojs.StateAvailable, ojs.StateActive, ojs.StateScheduled, ojs.StateRetryable, ojs.StatePending}

// Policy is a job's parsed unique policy.
type Policy struct {
	// Key is the uniqueness key: the lowercase hex SHA-256 of the
	// canonical JSON of the job's dimensions (ojs-unique-jobs.md 4).
	Key string
	// Name is what errors show as the unique key: the producer's key when
	// it sent one, else Key.
	Name string
	// Period ends the uniqueness that long after the holder's created_at
	// (0: no end but the states).
	Period time.Duration
	// States are the holder states that make a new job a duplicate.
	States []ojs.State
	// OnConflict is one of the OnConflict constants.
	OnConflict string
	// UpgradePriority raises a duplicate's holder to the new job's
	// priority when it is higher (ojs-priority.md 9.3, opt-in).
	UpgradePriority bool
}

// Counts reports whether a holder in state st makes a duplicate.
func (p *Policy) Counts(st ojs.State) bool { return slices.Contains(p.States, st) }

// wire is the unique object as producers send it: the official SDKs send
// key, period_ms and on_conflict (spec/README.md); ojs-unique-jobs.md 2
// defines keys, args_keys, meta_keys, period and states.
type wire struct {
	Key             *string  `json:"key"`
	Keys            []string `json:"keys"`
	ArgsKeys        []string `json:"args_keys"`
	MetaKeys        []string `json:"meta_keys"`
	Period          *string  `json:"period"`
	PeriodMs        *int64   `json:"period_ms"`
	States          []string `json:"states"`
	OnConflict      *string  `json:"on_conflict"`
	UpgradePriority *bool    `json:"upgrade_priority"`
}

var wireFields = []string{"key", "keys", "args_keys", "meta_keys", "period", "period_ms", "states", "on_conflict", "upgrade_priority"}

// Parse reads and validates j's unique policy and computes its key.
// prefix is the JSON path of the unique object with a trailing dot (e.g.
// "unique." or "jobs[2].unique."); errors are ojs.ValidationErrors naming
// the field. A job without unique has no policy (nil, nil).
func Parse(j *ojs.Job, prefix string) (*Policy, error) {
	if len(j.Unique) == 0 || string(j.Unique) == "null" {
		return nil, nil
	}
	bad := func(field, rule, got string) error {
		return &ojs.ValidationError{Field: strings.TrimSuffix(prefix+field, "."), Rule: rule, Received: got}
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(j.Unique, &fields); err != nil {
		return nil, &ojs.ValidationError{Field: strings.TrimSuffix(prefix, "."), Rule: "an object"}
	}
	for f := range fields {
		if !slices.Contains(wireFields, f) {
			return nil, bad(f, "a unique policy field (one of "+strings.Join(wireFields, ", ")+")", "")
		}
	}
	var w wire
	for _, f := range wireFields {
		raw, ok := fields[f]
		if !ok {
			continue
		}
		var err error
		switch f {
		case "key":
			err = json.Unmarshal(raw, &w.Key)
		case "keys":
			err = json.Unmarshal(raw, &w.Keys)
		case "args_keys":
			err = json.Unmarshal(raw, &w.ArgsKeys)
		case "meta_keys":
			err = json.Unmarshal(raw, &w.MetaKeys)
		case "period":
			err = json.Unmarshal(raw, &w.Period)
		case "period_ms":
			err = json.Unmarshal(raw, &w.PeriodMs)
		case "states":
			err = json.Unmarshal(raw, &w.States)
		case "on_conflict":
			err = json.Unmarshal(raw, &w.OnConflict)
		case "upgrade_priority":
			err = json.Unmarshal(raw, &w.UpgradePriority)
		}
		if err != nil {
			return nil, bad(f, typeRule(f), shorten(raw))
		}
	}
	p := &Policy{OnConflict: OnConflictReject, States: DefaultStates}
	if w.OnConflict != nil {
		switch *w.OnConflict {
		case OnConflictReject, OnConflictReplace, OnConflictReplaceExceptSchedule, OnConflictIgnore:
			p.OnConflict = *w.OnConflict
		default:
			return nil, bad("on_conflict", "one of reject, replace, replace_except_schedule, ignore", *w.OnConflict)
		}
	}
	if w.UpgradePriority != nil {
		p.UpgradePriority = *w.UpgradePriority
	}
	switch {
	case w.Period != nil && w.PeriodMs != nil:
		return nil, bad("period_ms", "absent when period is set (one of period, period_ms)", "")
	case w.Period != nil:
		d, err := ojs.ParseISODuration(*w.Period)
		if err != nil || d <= 0 {
			return nil, bad("period", "a positive ISO 8601 duration (e.g. PT1H)", *w.Period)
		}
		p.Period = d
	case w.PeriodMs != nil:
		if *w.PeriodMs < 1 {
			return nil, bad("period_ms", "an integer >= 1", strconv.FormatInt(*w.PeriodMs, 10))
		}
		p.Period = time.Duration(*w.PeriodMs) * time.Millisecond
	}
	if w.States != nil {
		if len(w.States) == 0 {
			return nil, bad("states", "a non-empty array of job states", "[]")
		}
		p.States = make([]ojs.State, 0, len(w.States))
		for i, s := range w.States {
			st := ojs.State(s)
			if !st.Valid() {
				return nil, bad(fmt.Sprintf("states[%d]", i), "a job state (scheduled, available, pending, active, completed, retryable, cancelled, discarded)", s)
			}
			if !p.Counts(st) {
				p.States = append(p.States, st)
			}
		}
	}
	dims, err := dimensions(j, &w, bad)
	if err != nil {
		return nil, err
	}
	canon, err := canonical(dims)
	if err != nil {
		return nil, bad("", "computable: "+err.Error(), "")
	}
	sum := sha256.Sum256(canon)
	p.Key = hex.EncodeToString(sum[:])
	p.Name = p.Key
	if w.Key != nil {
		p.Name = *w.Key
	}
	return p, nil
}

// dimensions collects what the key is computed from: type always; with a
// producer key, the key; with keys, the dimensions listed; with neither,
// type, queue and args (the whole of them).
func dimensions(j *ojs.Job, w *wire, bad func(field, rule, got string) error) (map[string]any, error) {
	dims := map[string]any{"type": j.Type}
	if w.Key != nil {
		if *w.Key == "" {
			return nil, bad("key", "a non-empty string", `""`)
		}
		if w.Keys != nil || w.ArgsKeys != nil || w.MetaKeys != nil {
			return nil, bad("keys", "absent when key is set (key names the job's identity itself)", "")
		}
		dims["key"] = *w.Key
		return dims, nil
	}
	keys := w.Keys
	if keys == nil {
		keys = []string{"type", "queue", "args"}
	}
	for i, k := range keys {
		switch k {
		case "type", "queue", "args", "meta":
		default:
			return nil, bad(fmt.Sprintf("keys[%d]", i), "one of type, queue, args, meta (case-sensitive)", k)
		}
		if slices.Index(keys, k) != i {
			return nil, bad(fmt.Sprintf("keys[%d]", i), "not repeated", k)
		}
	}
	if slices.Contains(keys, "queue") {
		dims["queue"] = j.Queue
	}
	if slices.Contains(keys, "args") {
		v, err := decode(j.Args)
		if err != nil {
			return nil, bad("", "computable: args: "+err.Error(), "")
		}
		if w.ArgsKeys != nil {
			obj, ok := argsObject(v)
			if !ok {
				return nil, bad("args_keys", "used with args that are an object (or an array whose first element is one)", "")
			}
			sel := make(map[string]any, len(w.ArgsKeys))
			for i, k := range w.ArgsKeys {
				val, ok := obj[k]
				if !ok {
					return nil, bad(fmt.Sprintf("args_keys[%d]", i), "a key present in args", k)
				}
				sel[k] = val
			}
			v = sel
		}
		dims["args"] = v
	} else if w.ArgsKeys != nil {
		return nil, bad("args_keys", "used only when keys contains args", "")
	}
	if slices.Contains(keys, "meta") {
		if len(w.MetaKeys) == 0 {
			return nil, bad("meta_keys", "a non-empty array when keys contains meta", "")
		}
		v, err := decode(j.Meta)
		if err != nil {
			return nil, bad("", "computable: meta: "+err.Error(), "")
		}
		obj, _ := v.(map[string]any)
		sel := make(map[string]any, len(w.MetaKeys))
		for _, k := range w.MetaKeys {
			sel[k] = obj[k] // an absent key counts as null
		}
		dims["meta"] = sel
	} else if w.MetaKeys != nil {
		return nil, bad("meta_keys", "used only when keys contains meta", "")
	}
	return dims, nil
}

// argsObject returns the object whose top-level keys args_keys select:
// args itself, or its first element (OJS args are an array; SDKs pass
// keyword arguments as one object).
func argsObject(v any) (map[string]any, bool) {
	if m, ok := v.(map[string]any); ok {
		return m, true
	}
	if a, ok := v.([]any); ok && len(a) > 0 {
		m, ok := a[0].(map[string]any)
		return m, ok
	}
	return nil, false
}

func decode(raw json.RawMessage) (any, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	err := d.Decode(&v)
	return v, err
}

// canonical serializes v with object keys sorted at every level, no
// whitespace, and numbers in their shortest round-trip form (RFC 8785).
func canonical(v any) ([]byte, error) {
	var b bytes.Buffer
	err := appendCanonical(&b, v)
	return b.Bytes(), err
}

func appendCanonical(b *bytes.Buffer, v any) error {
	switch x := v.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		b.WriteString(strconv.FormatBool(x))
	case string:
		appendString(b, x)
	case json.Number:
		f, err := strconv.ParseFloat(string(x), 64)
		if err != nil || math.IsInf(f, 0) {
			return fmt.Errorf("number %s out of range", x)
		}
		b.WriteString(formatNumber(f))
	case []any:
		b.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				b.WriteByte(',')
			}
			if err := appendCanonical(b, e); err != nil {
				return err
			}
		}
		b.WriteByte(']')
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteByte(',')
			}
			appendString(b, k)
			b.WriteByte(':')
			if err := appendCanonical(b, x[k]); err != nil {
				return err
			}
		}
		b.WriteByte('}')
	default:
		return fmt.Errorf("unexpected %T", v)
	}
	return nil
}

// formatNumber writes f as ECMAScript's Number.prototype.toString does
// (RFC 8785 3.2.2.3), for the ranges JSON payloads use.
func formatNumber(f float64) string {
	if f == 0 {
		return "0"
	}
	if a := math.Abs(f); a >= 1e21 || a < 1e-6 {
		s := strconv.FormatFloat(f, 'e', -1, 64)
		// Go writes e+21 / e-07; ECMAScript e+21 / e-7.
		mant, exp, _ := strings.Cut(s, "e")
		sign := exp[0]
		exp = strings.TrimLeft(exp[1:], "0")
		return mant + "e" + string(sign) + exp
	}
	return strconv.FormatFloat(f, 'f', -1, 64)
}

// appendString writes s as a JSON string escaping only what RFC 8785
// requires: the quote, the backslash and control characters.
func appendString(b *bytes.Buffer, s string) {
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"':
			b.WriteString(`\"`)
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\b':
			b.WriteString(`\b`)
		case r == '\f':
			b.WriteString(`\f`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20:
			fmt.Fprintf(b, `\u%04x`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
}

func typeRule(field string) string {
	switch field {
	case "key", "period", "on_conflict":
		return "a string"
	case "period_ms":
		return "an integer (milliseconds)"
	case "upgrade_priority":
		return "a boolean"
	}
	return "an array of strings"
}

func shorten(raw json.RawMessage) string {
	s := string(raw)
	if len(s) > 40 {
		s = s[:40] + "..."
	}
	return s
}
