package httpbind

import (
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"

	"github.com/gorilla/mux"

	"github.com/jetgate/jetgate/admission/ojs"
)

// server is the HTTP binding: the routes, the Backend they call and the
// middleware (ServeHTTP) around them.
type server struct {
	b      Backend
	cfg    Config
	log    *slog.Logger
	router *mux.Router
	// exact holds the handlers of the routes without variables, by method
	// and path, for the requests the router would send them (exactRoutes).
	exact    map[methodPath]http.Handler
	manifest manifest

	// closing is closed by CloseStreams: long-lived responses (progress
	// streams) end, so a graceful shutdown need not wait for them.
	closing   chan struct{}
	closeOnce sync.Once
}

// StreamCloser is implemented by the handler New returns: CloseStreams
// ends every open event stream (clients reconnect elsewhere). Call it when
// the HTTP server starts shutting down (http.Server.RegisterOnShutdown).
type StreamCloser interface{ CloseStreams() }

// CloseStreams ends every open event stream, now and from now on.
func (s *server) CloseStreams() { s.closeOnce.Do(func() { close(s.closing) }) }

// New returns the HTTP handler of the OJS binding, calling b for every
// operation. The handler is safe for concurrent use and keeps no state
// between requests.
func New(b Backend, cfg Config) (http.Handler, error) {
	if b == nil {
		return nil, errors.New("httpbind: nil Backend")
	}
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, errors.Join(errors.New("httpbind: invalid config"), err)
	}
	s := &server{b: b, cfg: cfg, log: cfg.Logger, closing: make(chan struct{})}
	s.manifest = newManifest(cfg)
	s.router = mux.NewRouter()
	// Paths are matched as sent: no 301 to a cleaned path, which would turn
	// a client's POST into a GET; unknown shapes answer the 404 envelope.
	s.router.SkipClean(true)
	routes := s.routes()
	registered := make([]*mux.Route, len(routes))
	for i, rt := range routes {
		methods := []string{rt.method}
		if rt.method == http.MethodGet {
			methods = append(methods, http.MethodHead)
		}
		h := s.traced(rt.method, rt.path, s.authorize(routeOp(rt.method, rt.path), s.limitBody(rt.limit, rt.h)))
		registered[i] = s.router.Handle(rt.path, h).Methods(methods...)
	}
	s.router.NotFoundHandler = http.HandlerFunc(s.notFound)
	s.router.MethodNotAllowedHandler = http.HandlerFunc(s.methodNotAllowed)
	s.exact = s.exactRoutes(routes, registered)
	return s, nil
}

// methodPath is a request's method and path.
type methodPath struct{ method, path string }

// exactRoutes maps the method and path of every route without variables
// to its handler, when the router itself sends that request there (an
// earlier route could shadow it): a map lookup then replaces the
// router's walk over its routes' patterns for the hot requests (enqueue,
// fetch, ACK), with the same handler, middleware included. Requests it
// does not hold, and every other method, path or error, go through the
// router as before.
func (s *server) exactRoutes(routes []route, registered []*mux.Route) map[methodPath]http.Handler {
	exact := map[methodPath]http.Handler{}
	for i, rt := range routes {
		if strings.Contains(rt.path, "{") || rt.method == http.MethodGet {
			continue // GET (and HEAD with it) stays with the router
		}
		var m mux.RouteMatch
		req := &http.Request{Method: rt.method, URL: &url.URL{Path: rt.path}, Header: http.Header{}}
		if s.router.Match(req, &m) && m.MatchErr == nil && m.Route == registered[i] {
			exact[methodPath{rt.method, rt.path}] = m.Handler
		}
	}
	return exact
}

// route is one row of the route table.
type route struct {
	method string
	path   string
	h      http.HandlerFunc
	limit  int64 // request body limit
}

// routes is the route table of the core binding (ojs-http-binding.md 2.1,
// 2.2, Appendix A) as far as Backend supports it: cron only for a
// CronBackend; workflows and schemas are not served and answer 404.
func (s *server) routes() []route {
	body, batch := s.cfg.MaxBodyBytes, s.cfg.MaxBatchBodyBytes
	rs := []route{
		{http.MethodGet, manifestPath, s.getManifest, body},
		{http.MethodGet, "/ojs/v1/health", s.health, body},

		{http.MethodPost, "/ojs/v1/jobs", s.enqueue, body},
		{http.MethodPost, "/ojs/v1/jobs/batch", s.enqueueBatch, batch},
		{http.MethodGet, "/ojs/v1/jobs/{id}", s.getJob, body},
		{http.MethodDelete, "/ojs/v1/jobs/{id}", s.cancelJob, body},
		{http.MethodPost, "/ojs/v1/jobs/{id}/activate", s.activateJob, body},

		{http.MethodPost, "/ojs/v1/workers/fetch", s.fetch, body},
		{http.MethodPost, "/ojs/v1/workers/ack", s.ack, body},
		{http.MethodPost, "/ojs/v1/workers/nack", s.nack, body},
		{http.MethodPost, "/ojs/v1/workers/heartbeat", s.heartbeat, body},

		{http.MethodGet, "/ojs/v1/queues", s.listQueues, body},
		{http.MethodGet, "/ojs/v1/queues/{name}/stats", s.queueStats, body},
		{http.MethodPost, "/ojs/v1/queues/{name}/pause", s.pauseQueue, body},
		{http.MethodPost, "/ojs/v1/queues/{name}/resume", s.resumeQueue, body},

		{http.MethodGet, "/ojs/v1/dead-letter", s.listDeadLetter, body},
		{http.MethodPost, "/ojs/v1/dead-letter/{id}/retry", s.retryDeadLetter, body},
		{http.MethodDelete, "/ojs/v1/dead-letter/{id}", s.deleteDeadLetter, body},

		{http.MethodGet, "/ojs/v1/events", s.events, body},
	}
	rs = append(rs, s.rateLimitRoutes()...)
	rs = append(rs, s.priorityRoutes()...)
	rs = append(rs, s.progressRoutes()...)
	rs = append(rs, s.priorityAdminRoutes()...)
	rs = append(rs, s.backpressureRoutes()...)
	rs = append(rs, s.probeRoutes()...)
	rs = append(rs, s.adminRoutes()...)
	rs = append(rs, s.workerRoutes()...)
	rs = append(rs, s.poolRoutes()...)
	rs = append(rs, s.cronRoutes()...)
	rs = append(rs, s.workflowRoutes()...)
	if s.cfg.MetricsHandler != nil {
		rs = append(rs, route{http.MethodGet, "/metrics", s.cfg.MetricsHandler.ServeHTTP, body})
	}
	return rs
}

func (s *server) notFound(w http.ResponseWriter, r *http.Request) {
	s.writeError(w, r, errRouteNotFound(r))
}

// methodNotAllowed answers 405 with an Allow header listing the methods the
// path does serve, found by matching the request again with each of them.
func (s *server) methodNotAllowed(w http.ResponseWriter, r *http.Request) {
	var allowed []string
	for _, m := range []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut,
		http.MethodPatch, http.MethodDelete} {
		alt := r.Clone(r.Context())
		alt.Method = m
		var match mux.RouteMatch
		if s.router.Match(alt, &match) && match.MatchErr == nil {
			allowed = append(allowed, m)
		}
	}
	s.writeError(w, r, errMethodNotAllowed(r, allowed))
}

// answer writes v with status 200, or err through writeError: the end of
// a handler whose operation answers its result.
func (s *server) answer(w http.ResponseWriter, r *http.Request, v any, err error) {
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.writeJSON(w, r, http.StatusOK, v)
}

// writeJSON writes v as the response body with the binding's media type.
// v is encoded before the status is written, so an encoding failure still
// answers a well-formed 500.
func (s *server) writeJSON(w http.ResponseWriter, r *http.Request, status int, v any) {
	if a, ok := v.(jsonAppender); ok {
		// The buffer goes back after w.Write, which copies it (writeJobs).
		buf := ojs.GetBuffer()
		defer ojs.PutBuffer(buf)
		*buf = append(a.AppendJSON((*buf)[:0]), '\n')
		writeBody(w, status, *buf)
		return
	}
	b, err := json.Marshal(v)
	if err != nil {
		s.log.Error("encode response", "path", r.URL.Path,
			"request_id", requestID(r.Context()), "error", err)
		status = http.StatusInternalServerError
		b, _ = json.Marshal(apiError{Status: status, Code: ojs.CodeBackendError,
			Message: "internal server error", Retryable: true}.Envelope(requestID(r.Context())))
	}
	writeBody(w, status, append(b, '\n'))
}

// writeBody writes b, a JSON body and its newline, with the binding's
// media type. w copies b: net/http's ResponseWriter keeps no reference to
// the slice it is given, so a pooled b may go back once writeBody returns.
func writeBody(w http.ResponseWriter, status int, b []byte) {
	w.Header()[keyContentType] = valueMediaType
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// jsonAppender is a body that encodes itself as encoding/json would,
// without reflection (wire.AckReply).
type jsonAppender interface{ AppendJSON([]byte) []byte }

// writeJobs writes {"<key>": job} for one job, or {"<key>": [jobs...]}
// for a list (nil jobs left out), and with withCount {"<key>": [jobs...],
// "count": n} (wire.BatchReply), each job in its public form
// (ojs.Job.Public) and encoded once by AppendPublicJSON (json.Marshal
// would copy each job for its public form and run a validating
// compaction over every job's bytes again). These are the hot responses:
// enqueue, batch enqueue and fetch.
func (s *server) writeJobs(w http.ResponseWriter, r *http.Request, status int, key string, one *ojs.Job, list []*ojs.Job, withCount bool) {
	// The buffer goes back when writeJobs returns, after writeBody.
	buf := ojs.GetBuffer()
	defer ojs.PutBuffer(buf)
	b := append(*buf, `{"`...)
	b = append(b, key...)
	b = append(b, `":`...)
	var err error
	if one != nil {
		b, err = one.AppendPublicJSON(b)
	} else {
		b = append(b, '[')
		n := 0
		for _, j := range list {
			if j == nil {
				continue
			}
			if n++; n > 1 {
				b = append(b, ',')
			}
			if b, err = j.AppendPublicJSON(b); err != nil {
				break
			}
		}
		b = append(b, ']')
		if withCount {
			b = strconv.AppendInt(append(b, `,"count":`...), int64(n), 10)
		}
	}
	if err != nil {
		s.writeJSON(w, r, status, errEncode{err}) // answers 500
		return
	}
	b = append(b, '}', '\n')
	*buf = b
	writeBody(w, status, b)
}

// errEncode fails to encode, so writeJSON answers 500 with err logged.
type errEncode struct{ err error }

func (e errEncode) MarshalJSON() ([]byte, error) { return nil, e.err }
