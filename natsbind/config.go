package natsbind

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"time"

	"github.com/jetgate/jetgate/admission/authz"
)

// Defaults of Config.
const (
	// DefaultPrefix is the subject prefix of every endpoint.
	DefaultPrefix = "ojs.v1"
	// ServiceName is the micro service's name (`nats micro info ojs`).
	ServiceName = "ojs"
	// DefaultQueueGroup is the queue group of every endpoint, so any
	// number of jetgate processes share the requests.
	DefaultQueueGroup = "jetgate"
	// DefaultMaxBodyBytes and DefaultMaxBatchBodyBytes are httpbind's.
	DefaultMaxBodyBytes      int64 = 1 << 20
	DefaultMaxBatchBodyBytes int64 = 16 << 20
	// DefaultMaxFetchCount is the most jobs one fetch returns.
	DefaultMaxFetchCount = 1000
	// DefaultMaxInFlight bounds the requests served at once by one
	// process; more wait in their subscription's buffer.
	DefaultMaxInFlight = 512
	// DefaultRequestTimeout bounds one request's backend work (a fetch's
	// wait_ms comes on top).
	DefaultRequestTimeout = 30 * time.Second
)

// Config configures the NATS binding. The zero value is usable.
type Config struct {
	// Prefix replaces "ojs.v1" in every subject (default DefaultPrefix).
	Prefix string
	// Version is the service version micro reports: jetgate's version
	// (semantic version; default "0.0.0-dev").
	Version string
	// QueueGroup is the endpoints' queue group (default DefaultQueueGroup).
	QueueGroup string
	// Auth, when set, requires "Authorization: Bearer <token>" headers,
	// checked with the role table of package authz (as HTTP does). nil
	// serves every request.
	Auth *authz.Keyring
	// MaxBodyBytes bounds request bodies (413 above), except batches,
	// bounded by MaxBatchBodyBytes.
	MaxBodyBytes      int64
	MaxBatchBodyBytes int64
	// MaxFetchCount is the most jobs one fetch returns (as HTTP's).
	MaxFetchCount int
	// MaxInFlight bounds the requests served at once.
	MaxInFlight int
	// RequestTimeout bounds each request's backend work.
	RequestTimeout time.Duration
	// Logger gets every 5xx at error level and a debug line per request.
	// Tokens are never logged.
	Logger *slog.Logger
}

func (c Config) withDefaults() Config {
	c.Prefix = strings.TrimSuffix(cmp.Or(c.Prefix, DefaultPrefix), ".")
	c.Version = cmp.Or(c.Version, "0.0.0-dev")
	c.QueueGroup = cmp.Or(c.QueueGroup, DefaultQueueGroup)
	c.MaxBodyBytes = cmp.Or(c.MaxBodyBytes, DefaultMaxBodyBytes)
	c.MaxBatchBodyBytes = max(cmp.Or(c.MaxBatchBodyBytes, DefaultMaxBatchBodyBytes), c.MaxBodyBytes)
	c.MaxFetchCount = cmp.Or(c.MaxFetchCount, DefaultMaxFetchCount)
	c.MaxInFlight = cmp.Or(c.MaxInFlight, DefaultMaxInFlight)
	c.RequestTimeout = cmp.Or(c.RequestTimeout, DefaultRequestTimeout)
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

func (c Config) validate() error {
	var errs []error
	if err := ValidPrefix(c.Prefix); err != nil {
		errs = append(errs, err)
	}
	if c.MaxBodyBytes < 0 || c.MaxFetchCount < 0 || c.MaxInFlight < 0 || c.RequestTimeout < 0 {
		errs = append(errs, errors.New("limits must not be negative"))
	}
	return errors.Join(errs...)
}

// ValidPrefix checks a subject prefix: dot-separated tokens, none empty,
// without wildcards or white space.
func ValidPrefix(p string) error {
	for _, tok := range strings.Split(p, ".") {
		if tok == "" || strings.ContainsAny(tok, "*> \t\r\n") {
			return fmt.Errorf("subject prefix %q: dot-separated subject tokens without wildcards or spaces", p)
		}
	}
	return nil
}

// semver is the version pattern micro accepts (semver.org 2.0.0).
var semver = regexp.MustCompile(`^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$`)

// serviceVersion is the version micro reports: jetgate's, without a
// leading "v" ("v1.2.3" is 1.2.3). A version that is still not a semantic
// version (a commit hash, "dev") is reported as 0.0.0-unknown, the real
// one in the service metadata "jetgate_version", rather than failing to
// serve.
func serviceVersion(v string) string {
	if t := strings.TrimPrefix(v, "v"); semver.MatchString(t) {
		return t
	}
	return "0.0.0-unknown"
}
