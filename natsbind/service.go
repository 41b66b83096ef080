package natsbind

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/jetgate/jetgate/admission/authz"
	"github.com/jetgate/jetgate/admission/ojs"
	"github.com/jetgate/jetgate/admission/ojs/uuidv7"
	"github.com/jetgate/jetgate/admission/ojs/wire"
)

// Headers of requests and replies.
const (
	// HeaderAuthorization carries "Bearer <token>".
	HeaderAuthorization = "Authorization"
	// HeaderRequestID is echoed (when safe) or generated, as over HTTP.
	HeaderRequestID = "X-Request-Id"
	// HeaderVersion is the OJS protocol version of every reply.
	HeaderVersion = "OJS-Version"
	// ProtocolVersion is the OJS protocol version spoken.
	ProtocolVersion = "1.0"
	// HeaderTraceParent is the W3C trace context header, accepted on every
	// request.
	HeaderTraceParent = "traceparent"
	maxRequestIDLen   = 128
)

// Service is the OJS NATS binding: one micro service "ojs" whose endpoints
// call Backend. Create it with New, then Start; Stop drains it.
type Service struct {
	nc  *nats.Conn
	b   Backend
	cfg Config
	log *slog.Logger
	eps []endpoint

	svc *microService

	// base is the parent of every request's context; cancelled by Stop
	// after the in-flight requests ended.
	base     context.Context
	cancel   context.CancelFunc
	stopping chan struct{} // closed by Stop: fetch waits end early
	sem      chan struct{} // bounds requests in flight
	wg       sync.WaitGroup

	mu     sync.Mutex
	closed bool // set by Stop: no request starts after
	stats  map[string]*endpointStats

	stopOnce sync.Once
}

// endpointStats are the counts of an endpoint, kept when a reply is sent
// (requests are served on their own goroutines): STATS shows them as
// micro's numbers (num_requests, num_errors, last_error, processing_time)
// and as the endpoint's data, with the requests in flight.
type endpointStats struct {
	Requests  int64         `json:"requests"`
	InFlight  int64         `json:"in_flight"`
	Errors    int64         `json:"errors"`
	LastError string        `json:"last_error,omitempty"` // the OJS error code
	Time      time.Duration `json:"processing_time"`
	// lastErrorFull is micro's form of the last error, "<status>:<code>".
	lastErrorFull string
}

// New returns the NATS binding over b on nc. Start serves it.
func New(nc *nats.Conn, b Backend, cfg Config) (*Service, error) {
	if nc == nil || b == nil {
		return nil, errors.New("natsbind: nil connection or Backend")
	}
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("natsbind: invalid config: %w", err)
	}
	s := &Service{nc: nc, b: b, cfg: cfg, log: cfg.Logger, stopping: make(chan struct{}),
		sem: make(chan struct{}, cfg.MaxInFlight), stats: map[string]*endpointStats{}}
	s.base, s.cancel = context.WithCancel(context.Background())
	s.eps = s.endpoints()
	return s, nil
}

// Start registers the service and its endpoints on the connection
// (microService: the NATS services protocol, so `nats micro ls|info|stats`
// see it).
func (s *Service) Start(ctx context.Context) error {
	if s.svc != nil {
		return errors.New("natsbind: already started")
	}
	for _, ep := range s.eps {
		s.stats[ep.name] = &endpointStats{}
	}
	svc, err := newMicroService(s.nc, micro.Config{
		Name:        ServiceName,
		Version:     serviceVersion(s.cfg.Version),
		Description: "Open Job Spec operations of jetgate (same bodies and error envelopes as the HTTP binding)",
		Metadata:    map[string]string{"prefix": s.cfg.Prefix, "ojs_version": ProtocolVersion, "jetgate_version": s.cfg.Version},
		QueueGroup:  s.cfg.QueueGroup,
	}, s.endpointStats)
	if err != nil {
		return fmt.Errorf("natsbind: add service: %w", err)
	}
	for _, ep := range s.eps {
		md := map[string]string{"operation": ep.op.String(), "http": ep.http}
		if err := svc.addEndpoint(ep.name, s.Subject(ep.subject), md, s.dispatch(ep)); err != nil {
			_ = svc.stop()
			return fmt.Errorf("natsbind: add endpoint %s: %w", ep.name, err)
		}
	}
	s.svc = svc
	// The subscriptions are sent to the server asynchronously: flush, so
	// that once Start returns a request finds its responder (no "no
	// responders" right after jetgate reports ready).
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
	}
	if err := s.nc.FlushWithContext(ctx); err != nil {
		_ = svc.stop()
		s.svc = nil
		return fmt.Errorf("natsbind: flush subscriptions: %w", err)
	}
	s.log.Info("NATS API serving", "service", ServiceName, "prefix", s.cfg.Prefix,
		"endpoints", len(s.eps), "access_control", s.cfg.Auth != nil)
	return nil
}

// endpointStats is a copy of the counts of the endpoint named name.
func (s *Service) endpointStats(name string) endpointStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st, ok := s.stats[name]; ok {
		return *st
	}
	return endpointStats{}
}

// Stop stops taking requests (micro drains the subscriptions), ends the
// waits of fetches in flight (they answer what they claimed), waits for
// every request in flight and releases the service. Safe to call twice.
func (s *Service) Stop() {
	s.stopOnce.Do(func() {
		if s.svc != nil {
			if err := s.svc.stop(); err != nil {
				s.log.Warn("stop NATS API", "error", err)
			}
		}
		s.mu.Lock()
		s.closed = true
		s.mu.Unlock()
		close(s.stopping)
		s.wg.Wait()
		s.cancel()
	})
}

// Kill stops at once, as a crash would: the requests in flight have
// their contexts cancelled (they answer 503 if they can), then Stop.
func (s *Service) Kill() {
	s.cancel()
	s.Stop()
}

// Subject is the full subject of an endpoint's "<area>.<op>".
func (s *Service) Subject(op string) string { return s.cfg.Prefix + "." + op }

// Subjects lists every endpoint's subject, in table order.
func (s *Service) Subjects() []string {
	out := make([]string, len(s.eps))
	for i, ep := range s.eps {
		out[i] = s.Subject(ep.subject)
	}
	return out
}

// dispatch serves each request on its own goroutine (a subscription
// delivers its messages one at a time, and a fetch may wait), at most
// MaxInFlight at once: beyond that the subscription buffers.
func (s *Service) dispatch(ep endpoint) func(*nats.Msg) {
	return func(msg *nats.Msg) {
		select {
		case s.sem <- struct{}{}:
		case <-s.stopping:
			s.refuse(ep, msg)
			return
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			<-s.sem
			s.refuse(ep, msg)
			return
		}
		s.wg.Add(1)
		s.mu.Unlock()
		go func() {
			defer func() { <-s.sem; s.wg.Done() }()
			s.serve(ep, msg)
		}()
	}
}

// refuse answers a request that arrived while the service stops: 503,
// retryable, so the client sends it again to another jetgate process.
func (s *Service) refuse(ep endpoint, msg *nats.Msg) {
	start := time.Now()
	s.mu.Lock()
	if st := s.stats[ep.name]; st != nil {
		st.InFlight++
	}
	s.mu.Unlock()
	c := &call{hdr: msg.Header, out: nats.Header{}, requestID: requestID(msg.Header)}
	code := s.replyError(ep, msg, c, ojs.ErrShuttingDown)
	s.count(ep, time.Since(start), c.out.Get(micro.ErrorCodeHeader), code)
}

// failureLevel is the level a 5xx answer is logged at: Info for the 503
// of a server shutting down (an expected answer: the client sends the
// request again to another process), Error for the others.
func failureLevel(err error) slog.Level {
	if errors.Is(err, ojs.ErrShuttingDown) {
		return slog.LevelInfo
	}
	return slog.LevelError
}

// call is one request as a handler sees it.
type call struct {
	ctx       context.Context
	data      []byte
	hdr       nats.Header
	out       nats.Header // headers of the reply
	requestID string
	obj       wire.Object // the body as an object, read once
}

// object returns the body as a JSON object (an empty body reads as {}).
func (c *call) object() (wire.Object, error) {
	if c.obj != nil {
		return c.obj, nil
	}
	o, err := wire.ParseObject(c.data)
	if err != nil {
		return nil, err
	}
	c.obj = o
	return o, nil
}

// serve runs one request: checks, handler, reply.
func (s *Service) serve(ep endpoint, msg *nats.Msg) {
	start := time.Now()
	s.mu.Lock()
	if st := s.stats[ep.name]; st != nil {
		st.InFlight++
	}
	s.mu.Unlock()
	c := &call{data: msg.Data, hdr: msg.Header, out: nats.Header{}, requestID: requestID(msg.Header)}
	if c.hdr == nil {
		c.hdr = nats.Header{}
	}
	ctx, cancel := context.WithTimeout(s.base, s.cfg.RequestTimeout+ep.extra)
	defer cancel()
	ctx, endSpan := s.traceContext(ctx, ep, c.hdr, c.requestID)
	c.ctx = ctx
	v, err := s.run(ep, c)
	var code string
	if err != nil {
		code = s.replyError(ep, msg, c, err)
	} else {
		code = s.reply(ep, msg, c, v)
	}
	endSpan(c.out.Get(micro.ErrorCodeHeader), code)
	s.count(ep, time.Since(start), c.out.Get(micro.ErrorCodeHeader), code)
}

// run checks access and size, then calls the handler; a panic answers 500.
func (s *Service) run(ep endpoint, c *call) (v any, err error) {
	defer func() {
		if p := recover(); p != nil {
			s.log.Error("panic serving NATS request", "subject", s.Subject(ep.subject),
				"request_id", c.requestID, "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
			v, err = nil, errors.New("panic")
		}
	}()
	if err := s.authorize(ep, c); err != nil {
		return nil, err
	}
	limit := s.cfg.MaxBodyBytes
	if ep.batch {
		limit = s.cfg.MaxBatchBodyBytes
	}
	if int64(len(c.data)) > limit {
		return nil, wire.ErrTooLarge(limit, int64(len(c.data)))
	}
	if err := wire.CheckBody(c.data); err != nil {
		return nil, err
	}
	if ep.noBody {
		// It reads nothing, but a body that is not a JSON object is
		// still refused (400), as every other endpoint refuses it.
		if _, err := c.object(); err != nil {
			return nil, err
		}
	}
	return ep.h(c)
}

// authorize applies the role table of package authz (the one HTTP uses):
// a missing or unknown token answers 401, a token of another role 403.
// The token is never logged nor echoed.
func (s *Service) authorize(ep endpoint, c *call) error {
	if s.cfg.Auth == nil || ep.op == authz.OpOpen {
		return nil
	}
	role := s.cfg.Auth.Role(bearerToken(header(c.hdr, HeaderAuthorization)))
	if role == authz.RoleNone {
		return wire.ErrUnauthorized()
	}
	if !role.Allows(ep.op) {
		return wire.ErrForbidden(role, ep.op, s.Subject(ep.subject))
	}
	return nil
}

// bearerToken returns the token of "Bearer <token>" (scheme
// case-insensitive, RFC 6750 2.1), "" if there is none.
func bearerToken(v string) string {
	const scheme = "bearer "
	if len(v) <= len(scheme) || !strings.EqualFold(v[:len(scheme)], scheme) {
		return ""
	}
	return strings.TrimSpace(v[len(scheme):])
}

// reply sends a success body: v encoded as JSON (raw bytes as they are).
// It returns the error code sent instead, if any.
func (s *Service) reply(ep endpoint, msg *nats.Msg, c *call, v any) string {
	var b []byte
	switch x := v.(type) {
	case json.RawMessage:
		b = x
	case statusBody:
		c.out.Set(micro.ErrorCodeHeader, strconv.Itoa(x.status))
		c.out.Set(micro.ErrorHeader, x.code)
		s.reply(ep, msg, c, x.body)
		return x.code
	default:
		var err error
		if b, err = json.Marshal(v); err != nil {
			return s.replyError(ep, msg, c, fmt.Errorf("encode reply: %w", err))
		}
	}
	s.send(msg, c, b)
	return ""
}

// statusBody is a reply whose body is not an error envelope but whose
// HTTP twin answers an error status (the health of a degraded server).
type statusBody struct {
	status int
	code   string
	body   any
}

// replyError sends the OJS error envelope with micro's error headers:
// Nats-Service-Error-Code is the HTTP status, Nats-Service-Error the OJS
// error code; the headers HTTP would send (Retry-After, the pressure
// headers, WWW-Authenticate) come along.
func (s *Service) replyError(ep endpoint, msg *nats.Msg, c *call, err error) string {
	e := wire.Classify(err)
	if e.Status >= 500 {
		s.log.Log(context.Background(), failureLevel(err), "NATS request failed", "subject", s.Subject(ep.subject),
			"status", e.Status, "request_id", c.requestID, "error", err)
	}
	for k, vs := range e.Header {
		k = headerName(k)
		c.out[k] = append(c.out[k], vs...)
	}
	c.out.Set(micro.ErrorCodeHeader, strconv.Itoa(e.Status))
	c.out.Set(micro.ErrorHeader, e.Code)
	b, mErr := json.Marshal(e.Envelope(c.requestID))
	if mErr != nil {
		docs := wire.DocsURL(ojs.CodeBackendError)
		b = []byte(`{"error":{"code":"` + ojs.CodeBackendError + `","type":"` + ojs.CodeBackendError +
			`","message":"internal server error","retryable":true,"details":{},"docs_url":"` + docs + `","doc_url":"` + docs + `"}}`)
	}
	s.send(msg, c, b)
	return e.Code
}

func (s *Service) send(msg *nats.Msg, c *call, body []byte) {
	if msg.Reply == "" {
		return // published without a reply subject: nobody to answer
	}
	c.out.Set(HeaderRequestID, c.requestID)
	c.out.Set(HeaderVersion, ProtocolVersion)
	if err := s.nc.PublishMsg(&nats.Msg{Subject: msg.Reply, Header: c.out, Data: body}); err != nil {
		s.log.Debug("NATS reply not sent", "request_id", c.requestID, "error", err)
	}
}

// count records a request answered: with an error reply when code (the
// OJS error code; status is the Nats-Service-Error-Code sent) is set.
func (s *Service) count(ep endpoint, d time.Duration, status, code string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.stats[ep.name]
	if st == nil {
		return
	}
	st.InFlight--
	st.Requests++
	st.Time += d
	if code != "" {
		st.Errors++
		st.LastError = code
		st.lastErrorFull = status + ":" + code
	}
}

// requestID returns the client's X-Request-Id if it is safe to echo
// (ojs-http-binding.md 19.2: 1..128 visible ASCII), else a new
// "req_<UUIDv7>".
func requestID(h nats.Header) string {
	if id := header(h, HeaderRequestID); id != "" && len(id) <= maxRequestIDLen {
		ok := true
		for i := range len(id) {
			if id[i] < 0x21 || id[i] > 0x7e {
				ok = false
				break
			}
		}
		if ok {
			return id
		}
	}
	return uuidv7.NewString("req_")
}

// headerName spells a header as the specs do: the error mapping builds
// HTTP headers, whose keys are canonicalized (X-Ojs-Queue-Depth), and NATS
// header lookups are case-sensitive, so X-OJS-* and WWW-Authenticate get
// their written spelling back.
func headerName(k string) string {
	switch {
	case strings.HasPrefix(k, "X-Ojs-"):
		return "X-OJS-" + k[len("X-Ojs-"):]
	case k == "Www-Authenticate":
		return "WWW-Authenticate"
	}
	return k
}

// header reads a request header whatever the case of its name: NATS
// headers are case-sensitive, but HTTP's are not, and clients write
// "authorization" as readily as "Authorization".
func header(h nats.Header, name string) string {
	if v := h.Get(name); v != "" {
		return v
	}
	for k, vs := range h {
		if len(vs) > 0 && strings.EqualFold(k, name) {
			return vs[0]
		}
	}
	return ""
}
