package events

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetgate/jetgate/admission/ojs"
	"github.com/jetgate/jetgate/jetstream/topology"
)

// Defaults of Config.
const (
	DefaultMaxAge  = 24 * time.Hour
	DefaultMaxMsgs = 100_000
	// DefaultMaxBytes caps the memory the event stream may use.
	DefaultMaxBytes = 64 << 20
	DefaultReplicas = 1

	// defaultTimeout bounds Ensure and Recent when ctx has no deadline.
	defaultTimeout = 5 * time.Second
)

// Config configures a Publisher.
type Config struct {
	// Source is the envelope's source URI, ojs://jetgate/<instance>.
	// Default: ojs://jetgate/<hostname>.
	Source string
	// Replicas of the event stream (default 1; 3 on a cluster).
	Replicas int
	// MaxAge is how long the stream keeps an event (default 24h).
	MaxAge time.Duration
	// MaxMsgs caps the events the stream keeps, oldest dropped first
	// (default 100_000; -1 for no cap).
	MaxMsgs int64
	// Logger receives publish failures at debug level (default: discard).
	Logger *slog.Logger
	// Now is the clock of envelope timestamps (default time.Now).
	Now func() time.Time
}

func (c *Config) defaults() {
	c.Source = cmp.Or(c.Source, defaultSource())
	c.Replicas = cmp.Or(c.Replicas, DefaultReplicas)
	c.MaxAge = cmp.Or(c.MaxAge, DefaultMaxAge)
	c.MaxMsgs = cmp.Or(c.MaxMsgs, DefaultMaxMsgs)
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
}

func (c *Config) validate() error {
	u, err := url.Parse(c.Source)
	if err != nil || u.Scheme == "" {
		return fmt.Errorf("events: source %q is not an absolute URI", c.Source)
	}
	if c.Replicas < 1 || c.Replicas > 5 {
		return fmt.Errorf("events: replicas must be 1..5, got %d", c.Replicas)
	}
	if c.MaxAge < 0 {
		return fmt.Errorf("events: max age must not be negative, got %s", c.MaxAge)
	}
	if c.MaxMsgs < -1 {
		return fmt.Errorf("events: max msgs must be -1 (no cap) or positive, got %d", c.MaxMsgs)
	}
	return nil
}

func defaultSource() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		return "ojs://jetgate"
	}
	return "ojs://jetgate/" + url.PathEscape(host)
}

// Publisher publishes OJS events on ojs.events.<type> and reads recent ones
// back from the event stream. It is safe for concurrent use; a nil
// *Publisher drops every event, so callers may run without events.
type Publisher struct {
	nc  *nats.Conn
	js  jetstream.JetStream
	cfg Config

	published atomic.Uint64
	dropped   atomic.Uint64
	// read counts messages Recent pulled from the stream (for tests).
	read atomic.Uint64
}

// Stats counts what a Publisher did since it was created.
type Stats struct {
	Published uint64 // handed to the NATS connection
	Dropped   uint64 // not published: encoding or connection failure
}

// New returns a Publisher that publishes on nc and reads through js.
func New(nc *nats.Conn, js jetstream.JetStream, cfg Config) (*Publisher, error) {
	if nc == nil || js == nil {
		return nil, errors.New("events: a NATS connection and a JetStream context are required")
	}
	cfg.defaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Publisher{nc: nc, js: js, cfg: cfg}, nil
}

// StreamConfig returns the configuration Ensure applies to the event stream.
func (p *Publisher) StreamConfig() jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:        topology.EventStream,
		Description: "OJS events (ojs.events.<type>) kept for GET /ojs/v1/events",
		Subjects:    []string{topology.EventSubjects},
		// Memory storage: the stream is a window of recent events, not a
		// record of truth (job records are). Three events per job written
		// to disk cost as much as the job itself (measured in bench/), and
		// a restart losing the window is acceptable for GET /ojs/v1/events.
		Storage:   jetstream.MemoryStorage,
		Retention: jetstream.LimitsPolicy,
		Discard:   jetstream.DiscardOld,
		MaxAge:    p.cfg.MaxAge,
		MaxMsgs:   p.cfg.MaxMsgs,
		MaxBytes:  DefaultMaxBytes,
		Replicas:  p.cfg.Replicas,
		// Events are published with core NATS: nobody waits for an ack.
		NoAck: true,
	}
}

// Ensure creates the event stream or updates it to the configured limits.
// It is idempotent.
func (p *Publisher) Ensure(ctx context.Context) error {
	ctx, cancel := withDefaultTimeout(ctx)
	defer cancel()
	if _, err := p.js.CreateOrUpdateStream(ctx, p.StreamConfig()); err != nil {
		return fmt.Errorf("ensure stream %s: %w", topology.EventStream, err)
	}
	return nil
}

// Stats returns the publish counters.
func (p *Publisher) Stats() Stats {
	if p == nil {
		return Stats{}
	}
	return Stats{Published: p.published.Load(), Dropped: p.dropped.Load()}
}

// envelope is ojs.Event with data encoded in the same pass.
type envelope struct {
	SpecVersion     string   `json:"specversion"`
	ID              string   `json:"id"`
	Type            string   `json:"type"`
	Source          string   `json:"source"`
	Time            ojs.Time `json:"time"`
	Subject         string   `json:"subject,omitempty"`
	DataContentType string   `json:"datacontenttype"`
	Data            any      `json:"data"`
}

// Publish emits one event of eventType about subject (the job id for job
// events, the queue name for queue events) with data as its payload; data
// must encode as a JSON object. It publishes with core NATS on
// topology.EventSubject(eventType) and returns at once: failures are logged
// at debug level and counted in Stats, never returned.
func (p *Publisher) Publish(eventType, subject string, data any) {
	if p == nil {
		return
	}
	id, err := uuid.NewV7()
	if err != nil {
		p.drop(eventType, subject, "event id", err)
		return
	}
	b, err := json.Marshal(envelope{
		SpecVersion:     SpecVersion,
		ID:              IDPrefix + id.String(),
		Type:            eventType,
		Source:          p.cfg.Source,
		Time:            ojs.Time{Time: p.cfg.Now().UTC().Truncate(time.Millisecond)},
		Subject:         subject,
		DataContentType: ContentType,
		Data:            data,
	})
	if err != nil {
		p.drop(eventType, subject, "encode", err)
		return
	}
	if err := p.nc.Publish(subjectOf(eventType), b); err != nil {
		p.drop(eventType, subject, "publish", err)
		return
	}
	p.published.Add(1)
}

func (p *Publisher) drop(eventType, subject, step string, err error) {
	p.dropped.Add(1)
	p.cfg.Logger.Debug("event dropped", "type", eventType, "subject", subject, "step", step, "error", err)
}

func withDefaultTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, defaultTimeout)
}
