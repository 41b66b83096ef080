package httpbind

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/jetgate/jetgate/admission/ojs"
)

// Limits of request fields that the binding leaves open.
const (
	// maxQueueNameLen is the queue name limit of ojs-core.md 4.2.
	maxQueueNameLen = 128
	// maxVisibilityTimeoutMs bounds visibility_timeout_ms on fetch and
	// heartbeat (24 h): longer jobs keep their reservation by heartbeats.
	maxVisibilityTimeoutMs = 24 * 60 * 60 * 1000
	// maxIDLen bounds job and worker ids in request bodies.
	maxIDLen = 256
)

// readBody reads the whole (size-limited) request body.
func readBody(r *http.Request) ([]byte, error) {
	b, err := io.ReadAll(r.Body)
	if err == nil {
		return b, nil
	}
	if mbe, ok := errors.AsType[*http.MaxBytesError](err); ok {
		return nil, errTooLarge(mbe.Limit)
	}
	return nil, &ojs.ValidationError{Field: "body", Rule: "a complete request body",
		Message: "could not read the request body: " + err.Error()}
}

// object is a JSON request object read field by field, so that each field's
// type is checked and named in errors while unknown fields are ignored.
// A JSON null counts as an absent field.
type object map[string]json.RawMessage

// readObject reads the request body as a JSON object. An empty body reads
// as {} so that required fields, not the body, are reported missing.
func readObject(r *http.Request) (object, error) {
	b, err := readBody(r)
	if err != nil {
		return nil, err
	}
	return parseObject(b)
}

func parseObject(b []byte) (object, error) {
	if len(bytes.TrimSpace(b)) == 0 {
		return object{}, nil
	}
	var o object
	if err := json.Unmarshal(b, &o); err != nil {
		return nil, jsonError(err)
	}
	if o == nil {
		return nil, notObject("null")
	}
	return o, nil
}

// jsonError names what is wrong with a body that is not a JSON object:
// invalid_payload, as malformed JSON is (ojs-errors.md 4.1).
func jsonError(err error) error {
	if se, ok := errors.AsType[*json.SyntaxError](err); ok {
		return inEnvelope(&ojs.ValidationError{Field: "body", Rule: "valid JSON",
			Received: fmt.Sprintf("syntax error at byte offset %d", se.Offset),
			Message:  fmt.Sprintf("malformed JSON at byte offset %d: %s", se.Offset, se.Error())})
	}
	if te, ok := errors.AsType[*json.UnmarshalTypeError](err); ok {
		return notObject(te.Value)
	}
	return inEnvelope(&ojs.ValidationError{Field: "body", Rule: "a JSON object", Message: "malformed JSON: " + err.Error()})
}

func notObject(got string) error {
	return inEnvelope(&ojs.ValidationError{Field: "body", Rule: "a JSON object", Received: got,
		Message: fmt.Sprintf("the request body must be a JSON object (received %s)", got)})
}

// get returns the raw value of name, or false when absent or null.
func (o object) get(name string) (json.RawMessage, bool) {
	v, ok := o[name]
	if !ok || string(v) == "null" {
		return nil, false
	}
	return v, true
}

// str reads a string field; required means present and non-empty.
func (o object) str(name string, required bool) (string, error) {
	raw, ok := o.get(name)
	if !ok {
		if required {
			return "", invalid(name, "a non-empty string", "nothing")
		}
		return "", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", invalid(name, "a string", describe(raw))
	}
	if required && s == "" {
		return "", invalid(name, "a non-empty string", `""`)
	}
	return s, nil
}

// id reads a required identifier (job_id, worker_id).
func (o object) id(name string, required bool) (string, error) {
	s, err := o.str(name, required)
	if err == nil && len(s) > maxIDLen {
		err = invalid(name, fmt.Sprintf("a string of at most %d bytes", maxIDLen), short(s))
	}
	return s, err
}

// integer reads an integer field in [lo, hi]; def when absent.
func (o object) integer(name string, def, lo, hi int64) (int64, error) {
	raw, ok := o.get(name)
	if !ok {
		return def, nil
	}
	rule := fmt.Sprintf("an integer between %d and %d", lo, hi)
	n, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil || n < lo || n > hi {
		return 0, invalid(name, rule, describe(raw))
	}
	return n, nil
}

// boolean reads an optional boolean field.
func (o object) boolean(name string) (*bool, error) {
	raw, ok := o.get(name)
	if !ok {
		return nil, nil
	}
	var b bool
	if err := json.Unmarshal(raw, &b); err != nil {
		return nil, invalid(name, "a boolean", describe(raw))
	}
	return &b, nil
}

// strings reads an array of non-empty strings; ok is false when absent.
func (o object) strings(name string) (list []string, ok bool, err error) {
	raw, ok := o.get(name)
	if !ok {
		return nil, false, nil
	}
	return stringArray(name, raw)
}

func stringArray(name string, raw json.RawMessage) ([]string, bool, error) {
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, true, invalid(name, "an array of strings", describe(raw))
	}
	list := make([]string, 0, len(items))
	for i, item := range items {
		var s string
		if err := json.Unmarshal(item, &s); err != nil || s == "" {
			return nil, true, invalid(fmt.Sprintf("%s[%d]", name, i), "a non-empty string", describe(item))
		}
		list = append(list, s)
	}
	return list, true, nil
}

// describe shortens a raw JSON value for the "received" detail.
func describe(raw json.RawMessage) string {
	return short(string(bytes.TrimSpace(raw)))
}

// checkQueueName enforces ojs-core.md 4.2: [a-z0-9][a-z0-9\-\.]*, at most
// 128 characters.
func checkQueueName(field, q string) error {
	ok := q != "" && len(q) <= maxQueueNameLen
	for i := 0; ok && i < len(q); i++ {
		c := q[i]
		alnum := c >= 'a' && c <= 'z' || c >= '0' && c <= '9'
		ok = alnum || i > 0 && (c == '-' || c == '.')
	}
	if !ok {
		return invalid(field, `a queue name matching ^[a-z0-9][a-z0-9\-\.]*$ of at most 128 characters`, strconv.Quote(short(q)))
	}
	return nil
}

// dedupe removes repeated strings, keeping the first occurrence's order.
func dedupe(list []string) []string {
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

// onlyFields refuses a field of o not in names, naming it: closed bodies
// turn a typo into a 400 instead of a setting silently not applied.
func onlyFields(o object, names ...string) error {
	for k := range o {
		if !slices.Contains(names, k) {
			return invalid(k, "one of "+strings.Join(names, ", "), "an unknown field")
		}
	}
	return nil
}
