package app

import (
	"cmp"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/jetgate/jetgate/admission/authz"
	"github.com/jetgate/jetgate/admission/ojs"
	"github.com/jetgate/jetgate/jetstream/events"
	"github.com/jetgate/jetgate/natsbind"
)

// Config is everything `jetgate serve` can be told, by flag or by
// JETGATE_<FLAG> environment variable.
// MaxRetention is the longest Retention and DeadRetention: 100 years.
// A record's TTL is a JetStream per-message TTL, whose expiry nats-server
// computes as the message's Unix time in nanoseconds plus the TTL, an
// int64 that overflows in 2262: in 2026 a TTL of about 235 years
// already wraps to the past and the record would go at once. 100 years
// stays clear of it until 2162.
const MaxRetention = 100 * 365 * 24 * time.Hour

type Config struct {
	DataDir, NatsAddr, HTTPAddr                                     string
	NatsURL, NatsCreds, NatsNKey, NatsUser, NatsPassword, NatsToken string
	NatsTLSCert, NatsTLSKey, NatsTLSCA                              string
	// Replicas of streams and buckets when using an external cluster
	// (default 1; 3 on a 3-node cluster).
	Replicas        int
	ShutdownTimeout time.Duration
	MaxBodyBytes    int64
	// MaxFetchCount is the most jobs one fetch returns (default 1000); a
	// larger count is served up to it. Wired into the HTTP binding and
	// admission alike.
	MaxFetchCount int
	LogLevel      string // debug|info|warn|error
	LogFormat     string // text|json
	// PprofAddr, when set, is the loopback address on which `jetgate
	// serve` serves net/http/pprof (heap and CPU profiles under load).
	// Off by default; never part of the API listener.
	PprofAddr string
	// Runtime is the Go collector's tuning of a `jetgate serve` process
	// (--gc-percent, --memory-limit). The serve command applies it with
	// TuneRuntime before Start; Start does not, so the test kit leaves its
	// host process's runtime alone.
	Runtime Runtime
	// InstanceName identifies this process in event sources and metrics
	// (default: the hostname).
	InstanceName string
	// DefaultTimeout, DefaultGracePeriod and DefaultHeartbeatTimeout are
	// the timeouts of jobs that set none (ojs-timeouts.md 5; defaults 30
	// min, 30 s, 60 s; a negative DefaultGracePeriod is none).
	DefaultTimeout, DefaultGracePeriod, DefaultHeartbeatTimeout time.Duration
	// ClaimAckWait is the ready consumers' AckWait (default 30 s): a
	// claim writes its lease timer after a third of it if the job still
	// runs, and a lease whose process died is enforced at most this long
	// after its deadline. Every process on one NATS must use the same.
	ClaimAckWait time.Duration
	// Retention keeps completed and cancelled job records (default 24 h);
	// DeadRetention keeps discarded ones, the dead letter queue (7 days).
	// Both are at most MaxRetention.
	Retention, DeadRetention time.Duration
	// QueueMaxDepth, QueueMaxSizeBytes and QueueOverflow are the
	// server-wide default bound of queues without their own (0: unbounded;
	// strategy reject, block or drop_oldest). MaxBlockTimeout caps how
	// long a blocked producer waits (default 30 s).
	QueueMaxDepth, QueueMaxSizeBytes int64
	QueueOverflow                    string
	// QueueCountActive counts active jobs against the default bound too.
	QueueCountActive bool
	MaxBlockTimeout  time.Duration

	// EventsStream keeps every lifecycle event in the stream OJS_EVENTS
	// (memory storage) for GET /ojs/v1/events, within EventsMaxAge,
	// EventsMaxMsgs and EventsMaxBytes (defaults 24 h, 100 000, 64 MiB).
	// Off by default: the endpoint then reads an in-memory capture that
	// runs while someone reads events, bounded by EventsBuffer events and
	// EventsBufferBytes (10 000, 16 MiB) and stopped after EventsIdle
	// (10 min) without a read. Events are published on NATS either way.
	EventsStream                  bool
	EventsMaxAge                  time.Duration
	EventsMaxMsgs, EventsMaxBytes int64
	EventsBuffer                  int
	EventsBufferBytes             int64
	EventsIdle                    time.Duration
	// EventsOwn is how many of the events it emitted itself this process
	// keeps in memory for GET /ojs/v1/events, heard on NATS or not, each
	// at most EventsOwnBytes (defaults 1000 and 4 KiB; -1 keeps none).
	// They cost no NATS message and are listed from the first read.
	EventsOwn      int
	EventsOwnBytes int64

	// AuthTokensFile, ProducerTokens, WorkerTokens and AdminTokens are the
	// HTTP API's bearer tokens (package authz has the role table): a file
	// of "role token" lines, and tokens given directly; all are merged.
	// No token at all: access control off, every request served.
	AuthTokensFile                            string
	ProducerTokens, WorkerTokens, AdminTokens []string

	// TLSCert and TLSKey, together, make the HTTP listener serve HTTPS
	// with this certificate; Server.ReloadTLS (SIGHUP) reads them again.
	TLSCert, TLSKey string
	// NoNatsAPI turns off the NATS micro service "ojs" (package natsbind),
	// served by default on jetgate's NATS connection with subjects under
	// NatsAPIPrefix (default "ojs.v1"). It uses the same bearer tokens.
	NoNatsAPI     bool
	NatsAPIPrefix string
	// DisableDashboard turns off the web dashboard (package
	// httpbind/dashboard) served at "/" (serve --dashboard=false).
	DisableDashboard bool

	// NatsAuthToken, with the embedded server, is the token its listener
	// requires of every client; jetgate's own connection sends it.
	// NatsNKey (above), with the embedded server, is the seed file of the
	// one user it accepts. Without either, bearer tokens make it require
	// the seed in DataDir/nats-user.nk, created at first start
	// (natsauth.go); with no token at all it accepts any client.
	NatsAuthToken string

	// TracesEndpoint, when set, exports OpenTelemetry spans over OTLP/HTTP
	// to this URL (e.g. http://collector:4318/v1/traces), sampling root
	// traces at TracesSampleRatio (0..1; the serve flag's default is 1)
	// and following the parent's sampled flag otherwise. TracerProvider, when set, is used instead
	// (tests, embedding). Without either no span is recorded, and a
	// request's traceparent still reaches the jobs it enqueues.
	TracesEndpoint    string
	TracesSampleRatio float64
	TracerProvider    trace.TracerProvider
}

// keyring builds the bearer-token keyring; nil when no token is configured.
func (c Config) keyring() (*authz.Keyring, error) {
	tokens := map[authz.Role][]string{
		authz.RoleProducer: slices.Clone(c.ProducerTokens),
		authz.RoleWorker:   slices.Clone(c.WorkerTokens),
		authz.RoleAdmin:    slices.Clone(c.AdminTokens),
	}
	if c.AuthTokensFile != "" {
		data, err := os.ReadFile(c.AuthTokensFile)
		if err != nil {
			return nil, fmt.Errorf("auth tokens file: %w", err)
		}
		if err := authz.ParseTokenFile(data, tokens); err != nil {
			return nil, fmt.Errorf("auth tokens file %s: %w", c.AuthTokensFile, err)
		}
	}
	k, err := authz.NewKeyring(tokens)
	if err != nil {
		return nil, fmt.Errorf("auth tokens: %w", err)
	}
	return k, nil
}

func (c Config) withDefaults() Config {
	c.DataDir = cmp.Or(c.DataDir, "./jetgate-data")
	c.NatsAddr = cmp.Or(c.NatsAddr, "127.0.0.1:4222")
	c.HTTPAddr = cmp.Or(c.HTTPAddr, "127.0.0.1:8080")
	c.Replicas = cmp.Or(c.Replicas, 1)
	c.ShutdownTimeout = cmp.Or(c.ShutdownTimeout, 30*time.Second)
	c.MaxBodyBytes = cmp.Or(c.MaxBodyBytes, 1<<20)
	c.MaxFetchCount = cmp.Or(c.MaxFetchCount, 1000)
	c.NatsAPIPrefix = cmp.Or(c.NatsAPIPrefix, natsbind.DefaultPrefix)
	c.DefaultHeartbeatTimeout = cmp.Or(c.DefaultHeartbeatTimeout, time.Minute)
	c.DefaultTimeout = cmp.Or(c.DefaultTimeout, 30*time.Minute)
	c.ClaimAckWait = cmp.Or(c.ClaimAckWait, 30*time.Second)
	c.Retention = cmp.Or(c.Retention, 24*time.Hour)
	c.DeadRetention = cmp.Or(c.DeadRetention, 7*24*time.Hour)
	return c
}

func (c Config) validate() error {
	if c.Replicas < 1 || c.Replicas > 5 {
		return fmt.Errorf("replicas must be 1..5, got %d", c.Replicas)
	}
	if c.NatsURL == "" && c.Replicas != 1 {
		return fmt.Errorf("replicas %d needs a cluster: the embedded server is a single node (set --nats-url)", c.Replicas)
	}
	if c.NatsAuthToken != "" && c.NatsURL != "" {
		return fmt.Errorf("--nats-auth-token secures the embedded server; with --nats-url use --nats-token or the other --nats-* credentials")
	}
	if err := c.validateNatsAuth(); err != nil {
		return err
	}
	if (c.TLSCert == "") != (c.TLSKey == "") {
		return fmt.Errorf("--tls-cert and --tls-key go together")
	}
	if (c.NatsTLSCert == "") != (c.NatsTLSKey == "") {
		return fmt.Errorf("--nats-tls-cert and --nats-tls-key go together")
	}
	if c.Retention < time.Second || c.DeadRetention < time.Second {
		return fmt.Errorf("retention and dead retention must be at least 1s")
	}
	if c.Retention > MaxRetention || c.DeadRetention > MaxRetention {
		return fmt.Errorf("retention and dead retention must be at most %s (100 years)", MaxRetention)
	}
	if err := c.backpressure().Validate("queue-"); err != nil {
		return fmt.Errorf("default queue bound: %w", err)
	}
	if c.DefaultTimeout < time.Second || c.DefaultHeartbeatTimeout < time.Second {
		return fmt.Errorf("default timeout and default heartbeat timeout must be at least 1s")
	}
	if c.ClaimAckWait < time.Second {
		return fmt.Errorf("--claim-ack-wait must be at least 1s, got %s", c.ClaimAckWait)
	}
	if c.MaxBlockTimeout < 0 {
		return fmt.Errorf("max block timeout must not be negative")
	}
	if c.MaxFetchCount < 1 {
		return fmt.Errorf("max fetch count must be at least 1, got %d", c.MaxFetchCount)
	}
	if c.EventsMaxAge < 0 || c.EventsIdle < 0 || c.EventsMaxMsgs < 0 || c.EventsMaxBytes < 0 || c.EventsBuffer < 0 || c.EventsBufferBytes < 0 {
		return fmt.Errorf("events limits must not be negative")
	}
	if c.EventsOwn < -1 || (c.EventsOwnBytes != 0 && c.EventsOwnBytes < 1024) {
		return fmt.Errorf("own events must be -1 (none) or more, each at least 1024 bytes, got %d events of %d bytes", c.EventsOwn, c.EventsOwnBytes)
	}
	if c.TracesSampleRatio < 0 || c.TracesSampleRatio > 1 {
		return fmt.Errorf("traces sample ratio must be within 0..1, got %g", c.TracesSampleRatio)
	}
	if err := natsbind.ValidPrefix(c.NatsAPIPrefix); err != nil {
		return fmt.Errorf("--nats-api-prefix: %w", err)
	}
	if c.MaxBodyBytes < 1024 {
		return fmt.Errorf("max body bytes %d is too small (minimum 1024)", c.MaxBodyBytes)
	}
	return nil
}

// backpressure is the server-wide default bound.
func (c Config) backpressure() ojs.Backpressure {
	return ojs.Backpressure{MaxDepth: c.QueueMaxDepth, MaxSizeBytes: c.QueueMaxSizeBytes, Strategy: c.QueueOverflow,
		CountActive: c.QueueCountActive}
}

// eventsConfig is the configuration of the event publisher.
func (c Config) eventsConfig(source string, log *slog.Logger) events.Config {
	return events.Config{
		Source:        source,
		Replicas:      c.Replicas,
		Logger:        log,
		Stream:        c.EventsStream,
		MaxAge:        c.EventsMaxAge,
		MaxMsgs:       c.EventsMaxMsgs,
		MaxBytes:      c.EventsMaxBytes,
		BufferEvents:  c.EventsBuffer,
		BufferBytes:   c.EventsBufferBytes,
		BufferIdle:    c.EventsIdle,
		OwnEvents:     c.EventsOwn,
		OwnEventBytes: int(min(c.EventsOwnBytes, 1<<30)),
	}
}
