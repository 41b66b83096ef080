package httpbind

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"mime"
	"net/http"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/jetgate/jetgate/admission/ojs"
	"github.com/jetgate/jetgate/admission/ojs/uuidv7"
)

// Wire constants of the binding.
const (
	// MediaType is the content type of every JSON response
	// (ojs-http-binding.md 4.1), written exactly, without parameters.
	MediaType = "application/openjobspec+json"
	// ProtocolVersion is the OJS-Version every response carries (3.2, 6.5).
	ProtocolVersion = "1.0"

	headerVersion   = "OJS-Version"
	headerRequestID = "X-Request-Id"
	maxRequestIDLen = 128
)

// Header keys in net/http's canonical spelling, so that reading or
// setting them does not canonicalize (allocate) on every request, and the
// values every response carries, shared by all responses: net/http only
// reads them, and a later Header.Add appends to a copy, as each has no
// spare capacity.
var (
	keyVersion      = http.CanonicalHeaderKey(headerVersion)
	keyContentType  = http.CanonicalHeaderKey("Content-Type")
	keyBlockTimeout = http.CanonicalHeaderKey(HeaderBlockTimeout)
	keyTraceparent  = http.CanonicalHeaderKey("traceparent") // W3C (tracing.go)
	valueVersion    = []string{ProtocolVersion}
	valueMediaType  = []string{MediaType}
)

type requestIDKey struct{}

// requestID returns the request id the middleware stored in ctx.
func requestID(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}

// ServeHTTP is the outer middleware, run for every request whatever the
// route, so 404, 405, 413 and panics carry the same headers and envelope:
// request id, OJS-Version, the request checks, panic recovery and the
// request's log line.
func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	id := incomingRequestID(r)
	if id == "" {
		id = newRequestID()
	}
	r = r.WithContext(context.WithValue(r.Context(), requestIDKey{}, id))
	h := w.Header()
	h[keyVersion] = valueVersion
	h[headerRequestID] = []string{id}
	rec := &recorder{ResponseWriter: w}
	defer s.logRequest(rec, r, start)
	defer s.recoverPanic(rec, r)
	if err := checkRequest(r); err != nil {
		s.writeError(rec, r, err)
		return
	}
	if h, ok := s.exact[methodPath{r.Method, r.URL.Path}]; ok {
		h.ServeHTTP(rec, r)
		return
	}
	s.router.ServeHTTP(rec, r)
}

func (s *server) logRequest(rec *recorder, r *http.Request, start time.Time) {
	if !s.log.Enabled(r.Context(), slog.LevelDebug) {
		return
	}
	s.log.LogAttrs(r.Context(), slog.LevelDebug, "http request",
		slog.String("method", r.Method),
		slog.String("path", r.URL.Path),
		slog.Int("status", rec.statusCode()),
		slog.Duration("duration", time.Since(start)),
		slog.String("request_id", requestID(r.Context())))
}

// recoverPanic turns a handler panic into a 500 backend_error envelope and
// logs it with its stack. If the handler had already started its response,
// the connection is aborted instead, so a truncated body never looks whole.
func (s *server) recoverPanic(rec *recorder, r *http.Request) {
	v := recover()
	if v == nil {
		return
	}
	if v == http.ErrAbortHandler {
		panic(v)
	}
	s.log.Error("panic serving request",
		"method", r.Method, "path", r.URL.Path, "request_id", requestID(r.Context()),
		"panic", fmt.Sprint(v), "stack", string(debug.Stack()))
	if rec.wrote {
		panic(http.ErrAbortHandler)
	}
	s.writeEnvelope(rec, r, classify(errors.New("panic")))
}

// incomingRequestID returns the client's X-Request-Id if it is safe to echo
// (ojs-http-binding.md 19.2): 1..128 visible ASCII characters, so it can
// neither split headers nor forge log lines. Otherwise "".
func incomingRequestID(r *http.Request) string {
	id := r.Header.Get(headerRequestID)
	if id == "" || len(id) > maxRequestIDLen {
		return ""
	}
	for i := range len(id) {
		if id[i] < 0x21 || id[i] > 0x7e {
			return ""
		}
	}
	return id
}

// newRequestID returns "req_" + a UUIDv7 (ojs-http-binding.md 19.3).
func newRequestID() string {
	return uuidv7.NewString("req_")
}

// manifestPath is exempt from the version check: clients read it to learn
// which versions the server speaks (ojs-http-binding.md 3.1, 21.1).
const manifestPath = "/ojs/manifest"

// checkRequest applies the checks every request passes before routing.
func checkRequest(r *http.Request) error {
	if r.URL.Path != manifestPath {
		if err := checkVersion(r.Header.Get(keyVersion)); err != nil {
			return err
		}
	}
	return checkContentType(r)
}

// checkVersion accepts any requested OJS-Version of major version 1
// ("1", "1.0", "1.0.0-rc.1" as the Go SDK sends, "v1.2"); another major
// answers 422 unsupported (ojs-http-binding.md 3.2), garbage 400.
func checkVersion(v string) error {
	v = strings.TrimSpace(v)
	if v == "" {
		return nil
	}
	major, _, _ := strings.Cut(strings.TrimPrefix(strings.TrimPrefix(v, "v"), "V"), ".")
	major, _, _ = strings.Cut(major, "-")
	n, err := strconv.Atoi(major)
	if err != nil || n < 0 {
		return &ojs.ValidationError{Field: headerVersion, Rule: "a version such as \"1.0\"", Received: short(v),
			Message: fmt.Sprintf("header '%s' must be a version such as \"1.0\" (received %q)", headerVersion, short(v))}
	}
	if n != 1 {
		return errUnsupported(
			fmt.Sprintf("OJS version %q is not supported; this server speaks %s", short(v), ProtocolVersion),
			map[string]any{"requested_version": short(v), "supported_versions": []string{ProtocolVersion}})
	}
	return nil
}

// checkContentType accepts request bodies sent as application/openjobspec+json
// or application/json, with or without parameters (charset is ignored: bodies
// are always read as UTF-8, 4.2). A body without Content-Type is accepted and
// read as JSON; any other type answers 400 naming the header (4.1).
func checkContentType(r *http.Request) error {
	if r.ContentLength == 0 || (r.Method != http.MethodPost && r.Method != http.MethodPut && r.Method != http.MethodPatch) {
		return nil
	}
	ct := r.Header.Get(keyContentType)
	if ct == "" || ct == MediaType || ct == "application/json" {
		return nil
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err == nil && (mt == MediaType || mt == "application/json") {
		return nil
	}
	return &ojs.ValidationError{
		Field: "Content-Type", Rule: MediaType + " or application/json", Received: short(ct),
		Message: fmt.Sprintf("unsupported Content-Type %q: send %s or application/json", short(ct), MediaType),
	}
}

// limitBody bounds the request body of h to n bytes (413 above). The body
// of a method that carries one is read and checked (readBody) before h
// runs, so that every such route refuses text that is not UTF-8 and keys
// given twice alike, also one whose handler reads no field (issue 31).
func (s *server) limitBody(n int64, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength > n {
			s.writeError(w, r, errTooLarge(n, r.ContentLength))
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, n)
		switch r.Method {
		case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
			b, err := readBody(r)
			if err != nil {
				s.writeError(w, r, err)
				return
			}
			r.Body = newCheckedBody(b)
		}
		h(w, r)
	}
}

// recorder remembers the status written, for the log line and so panic
// recovery knows whether a response has started.
type recorder struct {
	http.ResponseWriter
	status int
	wrote  bool
}

func (rec *recorder) WriteHeader(code int) {
	if !rec.wrote && code >= 200 {
		rec.status = code
		rec.wrote = true
	}
	rec.ResponseWriter.WriteHeader(code)
}

func (rec *recorder) Write(b []byte) (int, error) {
	if !rec.wrote {
		rec.WriteHeader(http.StatusOK)
	}
	return rec.ResponseWriter.Write(b)
}

// Flush serves handlers that type-assert http.Flusher (e.g. a streaming
// metrics handler).
func (rec *recorder) Flush() {
	if !rec.wrote {
		rec.WriteHeader(http.StatusOK)
	}
	_ = http.NewResponseController(rec.ResponseWriter).Flush()
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (rec *recorder) Unwrap() http.ResponseWriter { return rec.ResponseWriter }

func (rec *recorder) statusCode() int {
	if !rec.wrote {
		return http.StatusOK
	}
	return rec.status
}
