package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/jetgate/jetgate/admission/ojs"
	"github.com/jetgate/jetgate/admission/ojs/internal/jsonscan"
)

// Limits of request fields that the bindings leave open.
const (
	// MaxQueueNameLen is the queue name limit of ojs-core.md 4.2.
	MaxQueueNameLen = 128
	// MaxVisibilityTimeoutMs bounds visibility_timeout_ms on fetch and
	// heartbeat (24 h): longer jobs keep their reservation by heartbeats.
	MaxVisibilityTimeoutMs = 24 * 60 * 60 * 1000
	// MaxIDLen bounds job and worker ids in request bodies.
	MaxIDLen = 256
	// MaxWorkerMetadataBytes bounds the metadata a heartbeat keeps in
	// its worker's record.
	MaxWorkerMetadataBytes = 16 << 10
)

// Object is a JSON request Object read field by field, so that each field's
// type is checked and named in errors while unknown fields are ignored.
// A JSON null counts as an absent field.
type Object map[string]json.RawMessage

func ParseObject(b []byte) (Object, error) {
	if len(bytes.TrimSpace(b)) == 0 {
		return Object{}, nil
	}
	if o, ok := jsonscan.Object(b); ok {
		return o, nil
	}
	var o Object
	if err := json.Unmarshal(b, &o); err != nil {
		return nil, jsonError(err)
	}
	if o == nil {
		return nil, notObject("null")
	}
	return o, nil
}

// jsonError names what is wrong with a body that is not a JSON Object:
// invalid_payload, as malformed JSON is (ojs-errors.md 4.1).
func jsonError(err error) error {
	if se, ok := errors.AsType[*json.SyntaxError](err); ok {
		return InEnvelope(&ojs.ValidationError{Field: "body", Rule: "valid JSON",
			Received: fmt.Sprintf("syntax error at byte offset %d", se.Offset),
			Message:  fmt.Sprintf("malformed JSON at byte offset %d: %s", se.Offset, se.Error())})
	}
	if te, ok := errors.AsType[*json.UnmarshalTypeError](err); ok {
		return notObject(te.Value)
	}
	return InEnvelope(&ojs.ValidationError{Field: "body", Rule: "a JSON Object", Message: "malformed JSON: " + err.Error()})
}

func notObject(got string) error {
	return InEnvelope(&ojs.ValidationError{Field: "body", Rule: "a JSON Object", Received: got,
		Message: fmt.Sprintf("the request body must be a JSON Object (received %s)", got)})
}

// get returns the raw value of name, or false when absent or null.
func (o Object) Get(name string) (json.RawMessage, bool) {
	v, ok := o[name]
	if !ok || string(v) == "null" {
		return nil, false
	}
	return v, true
}

// str reads a string field; required means present and non-empty.
func (o Object) Str(name string, required bool) (string, error) {
	raw, ok := o.Get(name)
	if !ok {
		if required {
			return "", Invalid(name, "a non-empty string", "nothing")
		}
		return "", nil
	}
	s, ok := jsonscan.PlainString(raw)
	if !ok {
		var v string
		if err := json.Unmarshal(raw, &v); err != nil {
			return "", Invalid(name, "a string", Describe(raw))
		}
		s = v
	}
	if required && s == "" {
		return "", Invalid(name, "a non-empty string", `""`)
	}
	return s, nil
}

// id reads a required identifier (job_id, worker_id).
func (o Object) ID(name string, required bool) (string, error) {
	s, err := o.Str(name, required)
	if err == nil && len(s) > MaxIDLen {
		err = Invalid(name, fmt.Sprintf("a string of at most %d bytes", MaxIDLen), Short(s))
	}
	return s, err
}

// integer reads an integer field in [lo, hi]; def when absent.
func (o Object) Integer(name string, def, lo, hi int64) (int64, error) {
	raw, ok := o.Get(name)
	if !ok {
		return def, nil
	}
	n, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil || n < lo || n > hi {
		return 0, Invalid(name, fmt.Sprintf("an integer between %d and %d", lo, hi), Describe(raw))
	}
	return n, nil
}

// boolean reads an optional boolean field.
func (o Object) Boolean(name string) (*bool, error) {
	raw, ok := o.Get(name)
	if !ok {
		return nil, nil
	}
	var b bool
	if err := json.Unmarshal(raw, &b); err != nil {
		return nil, Invalid(name, "a boolean", Describe(raw))
	}
	return &b, nil
}

// strings reads an array of non-empty strings; ok is false when absent.
func (o Object) Strings(name string) (list []string, ok bool, err error) {
	raw, ok := o.Get(name)
	if !ok {
		return nil, false, nil
	}
	return StringArray(name, raw)
}

func StringArray(name string, raw json.RawMessage) ([]string, bool, error) {
	if list, ok := jsonscan.PlainStrings(raw); ok {
		return list, true, nil
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, true, Invalid(name, "an array of strings", Describe(raw))
	}
	list := make([]string, 0, len(items))
	for i, item := range items {
		var s string
		if err := json.Unmarshal(item, &s); err != nil || s == "" {
			return nil, true, Invalid(fmt.Sprintf("%s[%d]", name, i), "a non-empty string", Describe(item))
		}
		list = append(list, s)
	}
	return list, true, nil
}

// Describe shortens a raw JSON value for the "received" detail.
func Describe(raw json.RawMessage) string {
	return Short(string(bytes.TrimSpace(raw)))
}

// CheckQueueName enforces ojs-core.md 4.2: [a-z0-9][a-z0-9\-\.]*, at most
// 128 characters.
func CheckQueueName(field, q string) error {
	if !validQueueName(q) {
		return Invalid(field, `a queue name matching ^[a-z0-9][a-z0-9\-\.]*$ of at most 128 characters`, strconv.Quote(Short(q)))
	}
	return nil
}

// CheckQueueNames checks names, the queues of a request's field: the
// first invalid one is reported as field[i].
func CheckQueueNames(field string, names []string) error {
	for i, q := range names {
		if !validQueueName(q) {
			return CheckQueueName(fmt.Sprintf("%s[%d]", field, i), q)
		}
	}
	return nil
}

func validQueueName(q string) bool {
	ok := q != "" && len(q) <= MaxQueueNameLen
	for i := 0; ok && i < len(q); i++ {
		c := q[i]
		alnum := c >= 'a' && c <= 'z' || c >= '0' && c <= '9'
		ok = alnum || i > 0 && (c == '-' || c == '.')
	}
	return ok
}

// Dedupe removes repeated strings, keeping the first occurrence's order.
func Dedupe(list []string) []string {
	seen := make(map[string]bool, len(list))
	out := list[:0:0]
	for _, s := range list {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

// OnlyFields refuses a field of o not in names, naming it: closed bodies
// turn a typo into a 400 instead of a setting silently not applied.
func OnlyFields(o Object, names ...string) error {
	for k := range o {
		if !slices.Contains(names, k) {
			return Invalid(k, "one of "+strings.Join(names, ", "), "an unknown field")
		}
	}
	return nil
}

// fetchCount reads a fetch's "count" (default 1). Any integer of at least 1
// is accepted and served up to limit, the server's cap (Config.MaxFetchCount):
// an SDK asks for as many jobs as it has free handler slots, which may be
// far more than one fetch returns (spec/README.md, what clients send), so a
// large count is lowered like a list limit rather than refused. Only a
// count below 1 or a value that is not an integer answers 400.
func (o Object) FetchCount(limit int) (int64, error) {
	raw, ok := o.Get("count")
	if !ok {
		return 1, nil
	}
	n, err := strconv.ParseInt(string(raw), 10, 64)
	if errors.Is(err, strconv.ErrRange) && raw[0] != '-' {
		n, err = int64(limit), nil
	}
	if err != nil || n < 1 {
		return 0, Invalid("count", fmt.Sprintf("an integer of at least 1 (more than %d is served as %d)", limit, limit),
			Describe(raw))
	}
	return min(n, int64(limit)), nil
}

// Short cuts s for the "received" detail of an error.
func Short(s string) string {
	const n = 64
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// Invalid is a ValidationError about one field of the request.
func Invalid(field, rule, received string) error {
	return &ojs.ValidationError{Field: field, Rule: rule, Received: received}
}

// PrefixField puts a parent path in front of the field of a
// ValidationError or a TooLargeError.
func PrefixField(prefix string, err error) error {
	switch e := err.(type) {
	case *ojs.ValidationError:
		c := *e
		c.Field = prefix + c.Field
		return &c
	case *ojs.TooLargeError:
		c := *e
		c.Field = strings.TrimSuffix(prefix+c.Field, ".")
		return &c
	}
	return err
}

// Prefixed names a nested field in a ValidationError anywhere in err's
// chain ("body" becomes the prefix itself) and drops its message.
func Prefixed(err error, prefix string) error {
	if ve, ok := errors.AsType[*ojs.ValidationError](err); ok && prefix != "" {
		c := *ve
		if c.Field == "body" {
			c.Field = strings.TrimSuffix(prefix, ".")
		} else {
			c.Field = prefix + c.Field
		}
		c.Message = ""
		return &c
	}
	return err
}
