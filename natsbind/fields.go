package natsbind

import (
	"context"
	"encoding/json"
	"net/url"
	"strconv"
	"strings"

	"github.com/jetgate/jetgate/admission/ojs/wire"
)

// Where HTTP puts a value in the path or the query, the NATS body carries
// it as a field of the same name ("id", "queue", "key", "limit", ...).
// These read them with the same rules.

// strField reads a required non-empty string field.
func strField(c *call, name string) (string, error) {
	o, err := c.object()
	if err != nil {
		return "", err
	}
	return o.Str(name, true)
}

// jobIDField reads "id": missing answers 400 naming it; a value that is
// not a job id answers 404 as resource, as the HTTP path does.
func jobIDField(c *call, resource string) (string, error) {
	id, err := strField(c, "id")
	if err != nil {
		return "", err
	}
	return wire.JobID(id, resource)
}

// queueField reads "queue", checked against the queue name pattern.
func queueField(c *call) (string, error) {
	q, err := strField(c, "queue")
	if err != nil {
		return "", err
	}
	return q, wire.CheckQueueName("queue", q)
}

// withoutField returns the body without the field that named the resource,
// for the decoders that refuse unknown fields.
func withoutField(c *call, name string) ([]byte, error) {
	if _, err := c.object(); err != nil {
		return nil, err
	}
	return json.Marshal(restOf(c, name))
}

// restOf returns the body's fields but the one that named the resource
// (the body must already have been read as an object).
func restOf(c *call, name string) wire.Object {
	o, _ := c.object()
	rest := make(wire.Object, len(o))
	for k, v := range o {
		if k != name {
			rest[k] = v
		}
	}
	return rest
}

// queueSetting is the handler of an endpoint that reads a queue's setting
// for {"queue"} and writes it for {"queue", ...setting}: get reads it;
// decode reads the setting's fields and set writes them.
func queueSetting[S, R any](get func(context.Context, string) (R, error), decode func(wire.Object) (S, error),
	set func(context.Context, string, S) (R, error)) func(c *call) (any, error) {
	return func(c *call) (any, error) {
		q, err := queueField(c)
		if err != nil {
			return nil, err
		}
		if o, _ := c.object(); len(o) == 1 {
			return get(c.ctx, q)
		}
		v, err := decode(restOf(c, "queue"))
		if err != nil {
			return nil, err
		}
		return set(c.ctx, q, v)
	}
}

// parseQuery reads a listing's body as the query HTTP reads
// (queryValues), parsed by parse.
func parseQuery[Q any](c *call, parse func(url.Values) (Q, error)) (Q, error) {
	v, err := queryValues(c)
	if err != nil {
		var zero Q
		return zero, err
	}
	return parse(v)
}

// adminPage reads the page and per_page of an admin API listing.
func adminPage(c *call) (page, per int, err error) {
	v, err := queryValues(c)
	if err != nil {
		return 0, 0, err
	}
	return wire.ParseAdminPage(v)
}

// queryValues turns the body's fields into the query parameters HTTP
// reads: a string as it is, a number or boolean as written, an array of
// them as a repeated parameter.
func queryValues(c *call) (url.Values, error) {
	o, err := c.object()
	if err != nil {
		return nil, err
	}
	v := url.Values{}
	for k, raw := range o {
		if string(raw) == "null" {
			continue
		}
		items := []json.RawMessage{raw}
		if raw[0] == '[' {
			if err := json.Unmarshal(raw, &items); err != nil {
				return nil, wire.Invalid(k, "a string, a number or an array of them", wire.Describe(raw))
			}
		}
		for _, it := range items {
			s, ok := scalar(it)
			if !ok {
				return nil, wire.Invalid(k, "a string, a number or an array of them", wire.Describe(raw))
			}
			v.Add(k, s)
		}
	}
	return v, nil
}

func scalar(raw json.RawMessage) (string, bool) {
	t := strings.TrimSpace(string(raw))
	if t == "" {
		return "", false
	}
	switch t[0] {
	case '"':
		var s string
		return s, json.Unmarshal(raw, &s) == nil
	case '{', '[':
		return "", false
	}
	return t, true
}

func formatFloat(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }
