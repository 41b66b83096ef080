package httpbind

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/jetgate/jetgate/admission/authz"
)

// Defaults of Config.
const (
	// DefaultMaxBodyBytes is the largest request body accepted (1 MiB, the
	// envelope size ojs-json-format.md asks every implementation to support).
	DefaultMaxBodyBytes int64 = 1 << 20
	// DefaultMaxBatchBodyBytes is the largest POST /ojs/v1/jobs/batch body.
	DefaultMaxBatchBodyBytes int64 = 16 << 20
	// DefaultMaxFetchCount is the most jobs one fetch returns; a larger
	// count is served up to it.
	DefaultMaxFetchCount = 1000
	// DefaultHeartbeatTimeout, DefaultTimeout and DefaultGracePeriod are
	// the defaults of ojs-timeouts.md 5 the manifest shows when the
	// backend's are not wired in.
	DefaultHeartbeatTimeout = time.Minute
	DefaultTimeout          = 30 * time.Minute
	DefaultGracePeriod      = 30 * time.Second
	// DefaultImplementationName is implementation.name in the manifest.
	DefaultImplementationName = "jetgate"
	// DefaultServerVersion is implementation.version when none is set.
	DefaultServerVersion = "0.0.0-dev"
)

// Config configures the HTTP binding. The zero value is usable: every field
// has a default, except ConformanceLevel, whose zero is a valid level.
type Config struct {
	// MaxBodyBytes bounds every request body except batches (default 1 MiB).
	// Larger bodies answer 413 payload_too_large.
	MaxBodyBytes int64
	// MaxBatchBodyBytes bounds POST /ojs/v1/jobs/batch (default 16 MiB, at
	// least MaxBodyBytes).
	MaxBatchBodyBytes int64
	// MaxFetchCount is the most jobs one fetch returns (default 1000); a
	// larger "count" is served up to it, never refused. Wire the same value
	// into the backend's own cap.
	MaxFetchCount int

	// Logger receives one debug line per request and every 5xx at error
	// level (default slog.Default()).
	Logger *slog.Logger
	// TracerProvider, when set, records a server span per request, a
	// child of the request's traceparent (admission/tracing). Unset, no
	// span is recorded but a request's traceparent still reaches the
	// jobs it enqueues.
	TracerProvider trace.TracerProvider

	// Extensions lists the extension URIs actually implemented
	// (e.g. "urn:ojs:ext:priority"); the manifest shows them as strings.
	Extensions []string
	// Capabilities overrides or adds manifest capability flags; see
	// defaultCapabilities for what is declared without it.
	Capabilities map[string]bool
	// ConformanceLevel is the manifest's conformance_level, 0 to 4. It has
	// no default: 0 is a valid level.
	ConformanceLevel int
	// ServerVersion is implementation.version (default "0.0.0-dev").
	ServerVersion string
	// ImplementationName is implementation.name (default "jetgate").
	ImplementationName string

	// Auth, when set, requires a bearer token of an allowed role on every
	// route but the open ones (auth.go: routeOps). Nil: access control off.
	Auth *authz.Keyring

	// MetricsHandler, when set, serves GET /metrics.
	MetricsHandler http.Handler

	// DefaultHeartbeatTimeout is the heartbeat (visibility) timeout the
	// backend applies when neither the fetch nor the job sets one (default
	// 60 s); DefaultTimeout and DefaultGracePeriod are its execution
	// timeout and grace period defaults (30 min, 30 s; a negative grace
	// period is none). httpbind does not copy them into requests, which
	// would override a job's own; it publishes them in the manifest
	// (defaults) so workers can see them. Wire the same values into the
	// backend.
	DefaultHeartbeatTimeout time.Duration
	DefaultTimeout          time.Duration
	DefaultGracePeriod      time.Duration
}

// withDefaults returns c with every unset field defaulted.
func (c Config) withDefaults() Config {
	c.MaxBodyBytes = cmp.Or(c.MaxBodyBytes, DefaultMaxBodyBytes)
	c.MaxBatchBodyBytes = cmp.Or(c.MaxBatchBodyBytes, max(DefaultMaxBatchBodyBytes, c.MaxBodyBytes))
	c.MaxFetchCount = cmp.Or(c.MaxFetchCount, DefaultMaxFetchCount)
	c.Logger = cmp.Or(c.Logger, slog.Default())
	c.ServerVersion = cmp.Or(c.ServerVersion, DefaultServerVersion)
	c.ImplementationName = cmp.Or(c.ImplementationName, DefaultImplementationName)
	c.DefaultHeartbeatTimeout = cmp.Or(c.DefaultHeartbeatTimeout, DefaultHeartbeatTimeout)
	c.DefaultTimeout = cmp.Or(c.DefaultTimeout, DefaultTimeout)
	c.DefaultGracePeriod = cmp.Or(c.DefaultGracePeriod, DefaultGracePeriod)
	return c
}

// validate reports every invalid field at once.
func (c Config) validate() error {
	var errs []error
	if c.MaxBodyBytes < 1 {
		errs = append(errs, fmt.Errorf("MaxBodyBytes must be positive, got %d", c.MaxBodyBytes))
	}
	if c.MaxBatchBodyBytes < c.MaxBodyBytes {
		errs = append(errs, fmt.Errorf("MaxBatchBodyBytes (%d) must be at least MaxBodyBytes (%d)",
			c.MaxBatchBodyBytes, c.MaxBodyBytes))
	}
	if c.MaxFetchCount < 1 {
		errs = append(errs, fmt.Errorf("MaxFetchCount must be positive, got %d", c.MaxFetchCount))
	}
	if c.ConformanceLevel < 0 || c.ConformanceLevel > 4 {
		errs = append(errs, fmt.Errorf("ConformanceLevel must be 0..4, got %d", c.ConformanceLevel))
	}
	if c.DefaultHeartbeatTimeout < time.Millisecond {
		errs = append(errs, fmt.Errorf("DefaultHeartbeatTimeout must be at least 1ms, got %s", c.DefaultHeartbeatTimeout))
	}
	seen := make(map[string]bool, len(c.Extensions))
	for i, uri := range c.Extensions {
		switch {
		case uri == "":
			errs = append(errs, fmt.Errorf("config field Extensions[%d] is empty", i))
		case seen[uri]:
			errs = append(errs, fmt.Errorf("config field Extensions[%d] %q is listed twice", i, uri))
		}
		seen[uri] = true
	}
	return errors.Join(errs...)
}
