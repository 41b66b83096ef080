package events

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetgate/jetgate/admission/ojs"
	"github.com/jetgate/jetgate/admission/ojs/uuidv7"
	"github.com/jetgate/jetgate/jetstream/topology"
)

// Defaults of Config.
const (
	DefaultMaxAge  = 24 * time.Hour
	DefaultMaxMsgs = 100_000
	// DefaultMaxBytes caps the memory the event stream may use.
	DefaultMaxBytes = 64 << 20
	DefaultReplicas = 1

	// DefaultBufferEvents and DefaultBufferBytes bound the in-memory
	// capture that serves Recent without the stream; DefaultBufferIdle is
	// how long it runs after the last read.
	DefaultBufferEvents = 10_000
	DefaultBufferBytes  = 16 << 20
	DefaultBufferIdle   = 10 * time.Minute

	// DefaultOwnEvents and DefaultOwnEventBytes bound the ring of the
	// events a Publisher emitted itself: at most 1000 events of at most
	// 4 KiB each, so at most 4 MiB (a job event is 300-600 bytes).
	DefaultOwnEvents     = 1000
	DefaultOwnEventBytes = 4 << 10

	// defaultTimeout bounds Ensure and Recent when ctx has no deadline.
	defaultTimeout = 5 * time.Second
)

// Config configures a Publisher.
type Config struct {
	// Source is the envelope's source URI, ojs://jetgate/<instance>.
	// Default: ojs://jetgate/<hostname>.
	Source string

	// Stream keeps every event in the stream topology.EventStream, which
	// Ensure creates and Recent reads. Without it no event is stored:
	// Recent reads an in-memory capture that runs while someone reads.
	Stream bool
	// Replicas of the event stream (default 1; 3 on a cluster).
	Replicas int
	// MaxAge is how long the stream keeps an event (default 24h).
	MaxAge time.Duration
	// MaxMsgs caps the events the stream keeps, oldest dropped first
	// (default 100_000; -1 for no cap).
	MaxMsgs int64
	// MaxBytes caps the memory the stream uses, oldest dropped first
	// (default 64 MiB).
	MaxBytes int64

	// BufferEvents and BufferBytes bound the capture used without the
	// stream, oldest dropped first (defaults 10_000 events, 16 MiB).
	BufferEvents int
	BufferBytes  int64
	// BufferIdle stops the capture, freeing its buffer, when no Recent
	// came for that long (default 10 min).
	BufferIdle time.Duration

	// OwnEvents is how many of the events it emitted itself a Publisher
	// keeps for Recent, heard on NATS or not (default 1000; -1 keeps
	// none). OwnEventBytes bounds each (default 4 KiB, at least 1 KiB): a
	// larger event is kept with its result left out (result_omitted) or
	// its data cut down (data_truncated), as on NATS beyond max_payload.
	// Keeping an event sends and stores nothing: it is a copy into a ring
	// of reused buffers.
	OwnEvents     int
	OwnEventBytes int

	// Logger receives publish failures and the capture's start and stop at
	// debug level, and Ensure's warning about a leftover event stream
	// (default: discard).
	Logger *slog.Logger
	// Now is the clock of envelope timestamps (default time.Now).
	Now func() time.Time

	// Listening, when set, tells whether any subscriber on the NATS system
	// would receive a message published on subject now. An event nobody
	// would receive is not built and not published (Stats.Unheard): the
	// server would only have parsed it and found no one to deliver it to.
	// Set it only where the answer is exact, which is the embedded server
	// (one server, one account, no gateways): a subscription anywhere,
	// a stream capturing events or the capture of Recent makes it true.
	// Nil publishes every event.
	Listening func(subject string) bool
}

func (c *Config) defaults() {
	c.Source = cmp.Or(c.Source, defaultSource())
	c.Replicas = cmp.Or(c.Replicas, DefaultReplicas)
	c.MaxAge = cmp.Or(c.MaxAge, DefaultMaxAge)
	c.MaxMsgs = cmp.Or(c.MaxMsgs, DefaultMaxMsgs)
	c.MaxBytes = cmp.Or(c.MaxBytes, DefaultMaxBytes)
	c.BufferEvents = cmp.Or(c.BufferEvents, DefaultBufferEvents)
	c.BufferBytes = cmp.Or(c.BufferBytes, DefaultBufferBytes)
	c.BufferIdle = cmp.Or(c.BufferIdle, DefaultBufferIdle)
	c.OwnEvents = cmp.Or(c.OwnEvents, DefaultOwnEvents)
	c.OwnEventBytes = cmp.Or(c.OwnEventBytes, DefaultOwnEventBytes)
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
	if c.MaxBytes < 1024 {
		return fmt.Errorf("events: max bytes must be at least 1024, got %d", c.MaxBytes)
	}
	if c.BufferEvents < 1 || c.BufferBytes < 1024 {
		return fmt.Errorf("events: the buffer must hold at least 1 event and 1024 bytes, got %d events, %d bytes", c.BufferEvents, c.BufferBytes)
	}
	if c.OwnEvents < -1 || c.OwnEventBytes < 1024 {
		return fmt.Errorf("events: own events must be -1 (none) or positive and own event bytes at least 1024, got %d events, %d bytes", c.OwnEvents, c.OwnEventBytes)
	}
	if c.BufferIdle < 0 {
		return fmt.Errorf("events: buffer idle must not be negative, got %s", c.BufferIdle)
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
// back, from the event stream (Config.Stream) or from its capture. It is
// safe for concurrent use; a nil *Publisher drops every event, so callers
// may run without events. Close stops the capture.
type Publisher struct {
	nc  *nats.Conn
	js  jetstream.JetStream
	cfg Config
	cap *capture // nil with Config.Stream
	// realClock: Config.Now is time.Now, so an event's id and time come
	// from one clock read.
	realClock bool
	own       *own // nil with Config.OwnEvents -1
	ids       uuidv7.Gen

	published atomic.Uint64
	unheard   atomic.Uint64
	dropped   atomic.Uint64
	reduced   atomic.Uint64
	// read counts messages Recent pulled from the stream (for tests).
	read atomic.Uint64
}

// Stats counts what a Publisher did since it was created.
type Stats struct {
	Published uint64 // handed to the NATS connection
	Unheard   uint64 // not published: no subscriber (Config.Listening)
	Dropped   uint64 // not published: encoding or connection failure
	// Reduced counts copies of events published or kept with their
	// result left out or their data cut down, to fit NATS max_payload or
	// OwnEventBytes.
	Reduced uint64
}

// New returns a Publisher that publishes on nc and, with cfg.Stream, reads
// through js; without it js may be nil, and is used only by Ensure to
// warn about a leftover event stream.
func New(nc *nats.Conn, js jetstream.JetStream, cfg Config) (*Publisher, error) {
	if nc == nil || (js == nil && cfg.Stream) {
		return nil, errors.New("events: a NATS connection (and with Stream a JetStream context) is required")
	}
	realClock := cfg.Now == nil
	cfg.defaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	p := &Publisher{nc: nc, js: js, cfg: cfg, realClock: realClock}
	if cfg.OwnEvents > 0 {
		p.own = newOwn(cfg.OwnEvents, cfg.OwnEventBytes)
	}
	if !cfg.Stream {
		p.cap = &capture{nc: nc, maxEvents: cfg.BufferEvents, maxBytes: cfg.BufferBytes, idle: cfg.BufferIdle,
			now: cfg.Now, log: cfg.Logger}
	}
	return p, nil
}

// Close stops the capture, if running, for good; later Recent calls fail.
// Publishing goes on (it owns nothing else). Safe to call twice.
func (p *Publisher) Close() {
	if p != nil && p.cap != nil {
		p.cap.close()
	}
}

// StreamConfig returns the configuration Ensure applies to the event stream.
func (p *Publisher) StreamConfig() jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:        topology.EventStream,
		Description: "OJS events (ojs.events.<type>) kept for GET /ojs/v1/events (jetgate serve --events-stream)",
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
		MaxBytes:  p.cfg.MaxBytes,
		Replicas:  p.cfg.Replicas,
		// Events are published with core NATS: nobody waits for an ack.
		NoAck: true,
	}
}

// Ensure creates the event stream or updates it to the configured limits
// when Config.Stream is set. It is idempotent. Without Config.Stream it
// creates nothing and leaves an existing event stream alone (another
// jetgate process may run with it), but warns that it still stores every
// event.
func (p *Publisher) Ensure(ctx context.Context) error {
	ctx, cancel := withDefaultTimeout(ctx)
	defer cancel()
	if !p.cfg.Stream {
		if p.js == nil {
			return nil
		}
		_, err := p.js.Stream(ctx, topology.EventStream)
		switch {
		case err == nil:
			p.cfg.Logger.Warn("the event stream exists and stores every event, though this process runs without --events-stream; "+
				"delete it (nats stream rm "+topology.EventStream+") unless another jetgate process uses it", "stream", topology.EventStream)
		case !errors.Is(err, jetstream.ErrStreamNotFound):
			p.cfg.Logger.Debug("looking for a leftover event stream", "error", err)
		}
		return nil
	}
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
	return Stats{Published: p.published.Load(), Unheard: p.unheard.Load(), Dropped: p.dropped.Load(), Reduced: p.reduced.Load()}
}

// Publish emits one event of eventType about subject (the job id for job
// events, the queue name for queue events) with data as its payload; data
// must encode as a JSON object. It publishes with core NATS on
// topology.EventSubject(eventType) and returns at once: failures are logged
// at debug level and counted in Stats, never returned.
func (p *Publisher) Publish(eventType, subject string, data any) {
	p.publish(eventType, subject, nil, data, "")
}

// publish is Publish with the W3C traceparent header of the event's job
// ("" for none); its data is jd when not nil, else data.
func (p *Publisher) publish(eventType, subject string, jd *jobData, data any, traceparent string) {
	if to, heard, ok := p.wanted(eventType); ok {
		p.send(to, heard, eventType, subject, jd, data, traceparent)
	}
}

// send builds one event, keeps it in the own ring and, when heard,
// publishes it on to, the NATS subject of eventType. Its data is data
// when not nil, else jd; jd, when not nil, is also what a reduced event
// is made from (see reduce).
func (p *Publisher) send(to string, heard bool, eventType, subject string, jd *jobData, data any, traceparent string) {
	at := p.cfg.Now()
	var id uuidv7.UUID
	if p.realClock {
		id = p.ids.NextAt(at) // one clock read for both
	} else {
		id = p.ids.Next()
	}
	ev := envFields{id: id, typ: eventType, source: p.cfg.Source, subject: subject, at: at}
	if !heard && data == nil && p.own.lazyFits(subject, jd) {
		p.own.keepJob(to, &ev, jd) // encoded if someone reads it
		return
	}
	// The buffer goes back as soon as PublishMsg returns: nats.go copies
	// the payload before that (nats.go v1.55.0, nats.go: (*Conn).publish
	// hands data to nc.bw.appendBufs under nc.mu, and
	// (*natsWriter).appendBufs appends it to w.bufs, or writes it to
	// w.pending while reconnecting; nothing keeps the caller's slice).
	// The own ring copies it too.
	bp := ojs.GetBuffer()
	defer ojs.PutBuffer(bp)
	b, err := appendEvent((*bp)[:0], &ev, jd, data)
	if err != nil {
		p.drop(eventType, subject, "encode", err)
		return
	}
	*bp = b
	if p.own != nil {
		kept := b
		if len(b) > p.own.maxBytes {
			if kept = p.reduce(ev, jd, data, len(b), p.own.maxBytes); kept != nil {
				p.reduced.Add(1)
			}
		}
		if kept != nil {
			p.own.keep(to, kept)
		} else {
			p.cfg.Logger.Debug("event not kept: too large even reduced", "type", eventType, "subject", subject, "bytes", len(b))
		}
	}
	if !heard {
		return
	}
	msg := &nats.Msg{Subject: to, Data: b}
	if traceparent != "" {
		msg.Header = nats.Header{"traceparent": []string{traceparent}}
	}
	// A message beyond the server's max_payload would be refused (and the
	// event lost): it goes out reduced instead.
	if limit := p.nc.MaxPayload() - headerBytes(traceparent); int64(len(b)) > limit {
		if msg.Data = p.reduce(ev, jd, data, len(b), int(limit)); msg.Data == nil {
			p.drop(eventType, subject, "reduce to max_payload", fmt.Errorf("%d bytes, max_payload leaves %d", len(b), limit))
			return
		}
		p.reduced.Add(1)
	}
	if err := p.nc.PublishMsg(msg); err != nil { // copies msg.Data (the pooled buffer)
		p.drop(eventType, subject, "publish", err)
		return
	}
	p.published.Add(1)
}

// headerBytes is the size of the headers of an event's message: none, or
// the traceparent header ("NATS/1.0\r\ntraceparent: <55 bytes>\r\n\r\n").
func headerBytes(traceparent string) int64 {
	if traceparent == "" {
		return 0
	}
	return int64(len("NATS/1.0\r\ntraceparent: \r\n\r\n") + len(traceparent))
}

// wanted tells whether an event of eventType is worth building: someone
// on NATS hears it (heard, counted in Stats.Unheard when not), or the own
// ring keeps it. to is its NATS subject. A nil Publisher wants nothing.
func (p *Publisher) wanted(eventType string) (to string, heard, ok bool) {
	if p == nil {
		return "", false, false
	}
	to = subjectOf(eventType)
	heard = p.cfg.Listening == nil || p.cfg.Listening(to)
	if !heard {
		p.unheard.Add(1)
	}
	return to, heard, heard || p.own != nil
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
