package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"

	"github.com/nats-io/nats.go"
)

// request is one OJS operation, in the terms both bindings need: the NATS
// operation ("jobs.enqueue"), the HTTP method and path, the JSON body,
// and the values HTTP carries in the path or query, which NATS carries as
// fields of the body (NATSBIND.md).
type request struct {
	op     string
	method string
	path   string
	body   []byte
	fields []field
	header map[string]string
}

// field is a value of the path or query.
type field struct {
	name  string
	value any
	query bool // HTTP: a query parameter, not in the path
}

// response is a successful answer.
type response struct {
	body   []byte
	header http.Header
}

// transport carries requests to jetgate: over HTTP or over NATS. A
// failed answer comes back as *Error.
type transport interface {
	do(ctx context.Context, r *request) (*response, error)
	// nats reports whether the NATS-only batch operations exist.
	nats() bool
}

// mediaType is the OJS media type of every body.
const mediaType = "application/openjobspec+json"

// httpTransport speaks the HTTP binding.
type httpTransport struct {
	base  string
	hc    *http.Client
	token string
}

func (t *httpTransport) nats() bool { return false }

func (t *httpTransport) do(ctx context.Context, r *request) (*response, error) {
	u := t.base + r.path
	var q url.Values
	for _, f := range r.fields {
		if f.query && f.value != nil {
			if q == nil {
				q = url.Values{}
			}
			q.Set(f.name, fmt.Sprint(f.value))
		}
	}
	if q != nil {
		u += "?" + q.Encode()
	}
	var body io.Reader
	if r.body != nil {
		body = bytes.NewReader(r.body)
	}
	req, err := http.NewRequestWithContext(ctx, r.method, u, body)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", r.method, r.path, err)
	}
	req.Header.Set("Accept", mediaType)
	req.Header.Set("OJS-Version", "1.0.0-rc.1")
	if r.body != nil {
		req.Header.Set("Content-Type", mediaType)
	}
	if t.token != "" {
		req.Header.Set("Authorization", "Bearer "+t.token)
	}
	for k, v := range r.header {
		req.Header.Set(k, v)
	}
	res, err := t.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", r.method, r.path, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return nil, fmt.Errorf("%s %s: read answer: %w", r.method, r.path, err)
	}
	if res.StatusCode >= 400 {
		return nil, newError(res.StatusCode, b, res.Header)
	}
	return &response{body: b, header: res.Header}, nil
}

// natsTransport speaks the NATS binding: a request on <prefix>.<op>.
type natsTransport struct {
	nc     *nats.Conn
	prefix string
	token  string
}

func (t *natsTransport) nats() bool { return true }

// Headers of a micro service's error reply.
const (
	natsErrorCodeHeader = "Nats-Service-Error-Code"
	natsErrorHeader     = "Nats-Service-Error"
)

func (t *natsTransport) do(ctx context.Context, r *request) (*response, error) {
	body, err := natsBody(r.body, r.fields)
	if err != nil {
		return nil, err
	}
	msg := nats.NewMsg(t.prefix + "." + r.op)
	msg.Data = body
	if t.token != "" {
		msg.Header.Set("Authorization", "Bearer "+t.token)
	}
	for k, v := range r.header {
		msg.Header.Set(k, v)
	}
	reply, err := t.nc.RequestMsgWithContext(ctx, msg)
	if err != nil {
		if errors.Is(err, nats.ErrNoResponders) {
			return nil, &Error{Status: http.StatusServiceUnavailable, Code: "unavailable", Retryable: true,
				Message: "no jetgate answers on " + msg.Subject + " (nats: no responders)"}
		}
		return nil, fmt.Errorf("%s: %w", msg.Subject, err)
	}
	h := http.Header{}
	for k, vs := range reply.Header {
		for _, v := range vs {
			h.Add(k, v)
		}
	}
	if code := h.Get(natsErrorCodeHeader); code != "" {
		status, err := strconv.Atoi(code)
		if err != nil || status < 400 {
			status = http.StatusInternalServerError
		}
		e := newError(status, reply.Data, h)
		if e.Message == "" {
			e.Message = h.Get(natsErrorHeader)
		}
		return nil, e
	}
	return &response{body: reply.Data, header: h}, nil
}

// natsBody puts the path and query values in the body: as the only
// fields when there is no body, else spliced in front of the body's.
func natsBody(body []byte, fields []field) ([]byte, error) {
	if len(fields) == 0 {
		if body == nil {
			return []byte("{}"), nil
		}
		return body, nil
	}
	var b bytes.Buffer
	b.WriteByte('{')
	n := 0
	for _, f := range fields {
		if f.value == nil {
			continue
		}
		v, err := json.Marshal(f.value)
		if err != nil {
			return nil, err
		}
		if n > 0 {
			b.WriteByte(',')
		}
		n++
		k, _ := json.Marshal(f.name)
		b.Write(k)
		b.WriteByte(':')
		b.Write(v)
	}
	rest := bytes.TrimSpace(body)
	if len(rest) >= 2 && rest[0] == '{' {
		inner := bytes.TrimSpace(rest[1 : len(rest)-1])
		if len(inner) > 0 {
			if n > 0 {
				b.WriteByte(',')
			}
			b.Write(inner)
		}
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}
