package dashboard

import (
	"cmp"
	"context"
	"embed"
	"errors"
	"io/fs"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/jetgate/jetgate/admission/authz"
	"github.com/jetgate/jetgate/admission/ojs"
)

// Backend is what the dashboard reads: the operations that already serve
// the HTTP routes GET /ojs/v1/queues, /ojs/v1/admin/queues/{name},
// /ojs/v1/queues/{name}/priority-stats, /ojs/v1/rate-limits,
// /ojs/v1/events and /ojs/v1/health. jetgate's app passes the same
// backend it gives httpbind (admission.Service with admin.Admin).
type Backend interface {
	ListQueues(ctx context.Context) ([]ojs.QueueInfo, error)
	AdminQueue(ctx context.Context, name string) (*ojs.AdminQueue, error)
	PriorityStats(ctx context.Context, queue string) (*ojs.PriorityStats, error)
	RateLimits(ctx context.Context, page ojs.PageRequest) (*ojs.RateLimitPage, error)
	RecentEvents(ctx context.Context, q ojs.EventQuery) ([]ojs.Event, error)
	Health(ctx context.Context) ojs.Health
}

// Config configures a Dashboard. The zero value serves an open dashboard
// with the defaults below.
type Config struct {
	// Auth, when set, lets only admin tokens in (authz.OpAdmin), given as
	// "Authorization: Bearer", the token query parameter or the cookie
	// the page sets (see auth.go). Nil: open, like the HTTP API.
	Auth *authz.Keyring
	// Version is jetgate's version, shown in the page header.
	Version string
	// Interval is how often streams get a snapshot (default 1 s).
	Interval time.Duration
	// EventInterval is how often new events are looked for and pushed
	// (default 500 ms).
	EventInterval time.Duration
	// MaxQueues and MaxKeys bound a snapshot: queues past MaxQueues (by
	// name) and rate-limit keys past MaxKeys are counted, not shown
	// (defaults 200 and 100).
	MaxQueues, MaxKeys int
	// MaxEvents is how many recent events a snapshot carries (default 50).
	MaxEvents int
	// Concurrency is how many queues are read at once (default 8).
	Concurrency int
	// Timeout bounds one snapshot (default 5 s).
	Timeout time.Duration
	Logger  *slog.Logger
}

func (c Config) withDefaults() Config {
	c.Interval = cmp.Or(c.Interval, time.Second)
	c.EventInterval = cmp.Or(c.EventInterval, 500*time.Millisecond)
	c.MaxQueues = cmp.Or(c.MaxQueues, 200)
	c.MaxKeys = cmp.Or(c.MaxKeys, 100)
	c.MaxEvents = cmp.Or(c.MaxEvents, 50)
	c.Concurrency = cmp.Or(c.Concurrency, 8)
	c.Timeout = cmp.Or(c.Timeout, 5*time.Second)
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

func (c Config) validate() error {
	var errs []error
	if c.Interval < 0 || c.EventInterval < 0 || c.Timeout < 0 {
		errs = append(errs, errors.New("intervals and timeout must not be negative"))
	}
	if c.MaxQueues < 0 || c.MaxKeys < 0 || c.MaxEvents < 0 || c.Concurrency < 0 {
		errs = append(errs, errors.New("limits must not be negative"))
	}
	if c.MaxKeys > 200 {
		errs = append(errs, errors.New("MaxKeys must be at most 200 (the rate-limit listing's page)"))
	}
	if c.MaxEvents > 1000 {
		errs = append(errs, errors.New("MaxEvents must be at most 1000 (the event listing's limit)"))
	}
	return errors.Join(errs...)
}

// Paths the dashboard serves. PagePath is exact; everything under Prefix
// is the dashboard's.
const (
	PagePath     = "/"
	Prefix       = "/dashboard/"
	SnapshotPath = Prefix + "snapshot"
	StreamPath   = Prefix + "stream"
	assetsPath   = Prefix + "assets/"
)

//go:embed assets
var assets embed.FS

// Dashboard is the web dashboard: an http.Handler for its paths, and the
// owner of the goroutine that feeds its streams.
type Dashboard struct {
	b      Backend
	cfg    Config
	log    *slog.Logger
	hub    *hub
	files  http.Handler
	closed chan struct{}
	once   sync.Once
}

// New returns a dashboard reading b. Call Close when the HTTP server shuts
// down: it ends every stream and stops the feeding goroutine.
func New(b Backend, cfg Config) (*Dashboard, error) {
	if b == nil {
		return nil, errors.New("dashboard: nil Backend")
	}
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, errors.Join(errors.New("dashboard: invalid config"), err)
	}
	sub, err := fs.Sub(assets, "assets")
	if err != nil {
		return nil, err
	}
	d := &Dashboard{b: b, cfg: cfg, log: cfg.Logger, closed: make(chan struct{}),
		files: http.StripPrefix(assetsPath, http.FileServerFS(sub))}
	d.hub = newHub(d)
	return d, nil
}

// Close ends every open stream, now and from now on, and waits for the
// feeding goroutine to stop. Safe to call twice.
func (d *Dashboard) Close() {
	d.once.Do(func() { close(d.closed) })
	d.hub.stop()
}

// Owns reports whether path is one of the dashboard's: "/" and everything
// under /dashboard/.
func Owns(path string) bool { return path == PagePath || strings.HasPrefix(path, Prefix) }

// Wrap returns a handler that serves the dashboard's paths (Owns) with d
// and every other request with next (the OJS HTTP binding).
func (d *Dashboard) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if Owns(r.URL.Path) {
			d.ServeHTTP(w, r)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// ServeHTTP serves the page, its assets, the snapshot and the stream. Only
// GET and HEAD are served; with Auth set, every path but the static
// assets needs an admin token.
func (d *Dashboard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		h.Set("Allow", "GET, HEAD")
		writeError(w, http.StatusMethodNotAllowed, ojs.CodeInvalidRequest,
			"method "+r.Method+" is not allowed on "+r.URL.Path+" (allowed: GET, HEAD)")
		return
	}
	if strings.HasPrefix(r.URL.Path, assetsPath) {
		// Open: the page's script and style are the repository's source,
		// and the sign-in form needs the style. Files only, no listing.
		if strings.HasSuffix(r.URL.Path, "/") {
			writeError(w, http.StatusNotFound, ojs.CodeNotFound, "no dashboard resource at "+r.URL.Path)
			return
		}
		h.Set("Cache-Control", "no-cache")
		d.files.ServeHTTP(w, r)
		return
	}
	if !d.authorize(w, r) {
		return
	}
	switch p := r.URL.Path; {
	case p == PagePath:
		d.page(w, r)
	case p == SnapshotPath:
		d.snapshot(w, r)
	case p == StreamPath:
		d.stream(w, r)
	default:
		writeError(w, http.StatusNotFound, ojs.CodeNotFound, "no dashboard resource at "+p)
	}
}

// page serves index.html. A request that carried ?token= is redirected to
// "/" once the cookie is set (authorize), so the token leaves the address
// bar and the history.
func (d *Dashboard) page(w http.ResponseWriter, r *http.Request) {
	if r.URL.Query().Has(tokenParam) {
		http.Redirect(w, r, PagePath, http.StatusSeeOther)
		return
	}
	h := w.Header()
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; base-uri 'none'; frame-ancestors 'none'; form-action 'self'")
	http.ServeFileFS(w, r, assets, "assets/index.html")
}

// snapshot is GET /dashboard/snapshot: one snapshot as JSON, the same
// document the stream sends as its "snapshot" events.
func (d *Dashboard) snapshot(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), d.cfg.Timeout)
	defer cancel()
	b, err := d.Snapshot(ctx).MarshalJSON()
	if err != nil {
		d.log.Error("encode dashboard snapshot", "error", err)
		writeError(w, http.StatusInternalServerError, ojs.CodeBackendError, "the snapshot could not be encoded")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(append(b, '\n'))
}
