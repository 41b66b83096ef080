package events

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/jetgate/jetgate/jetstream/topology"
)

// errClosed is returned by Recent after Close.
var errClosed = errors.New("events: publisher closed")

// capture keeps the events published on ojs.events.> (by this process and
// every other one on the same NATS) in a bounded buffer, for Recent when
// no event stream is kept. It runs only while someone reads: the first
// read subscribes, and after idle without a read the subscription ends
// and the buffer is freed.
type capture struct {
	nc        *nats.Conn
	maxEvents int
	maxBytes  int64
	idle      time.Duration
	now       func() time.Time
	log       *slog.Logger

	mu       sync.Mutex
	closed   bool
	sub      *nats.Subscription
	buf      *ring // nil while stopped
	lastRead time.Time
	timer    *time.Timer
	starts   uint64 // subscriptions made (for tests)
}

// ring is the buffer of one run of the capture, oldest event first.
type ring struct {
	ents    []captured
	bytes   int64
	dropped uint64 // events pushed out by the bounds
}

// captured is one event as it arrived; it is decoded only when read.
type captured struct {
	subject string
	data    []byte
}

// capturedOverhead approximates the memory of an entry besides its data
// and subject, so that many tiny events also count against maxBytes.
const capturedOverhead = 64

func (e captured) size() int64 { return int64(len(e.data)+len(e.subject)) + capturedOverhead }

// push appends e and drops the oldest events until both bounds hold. An
// event larger than maxBytes on its own is not kept.
func (r *ring) push(e captured, maxEvents int, maxBytes int64) {
	size := e.size()
	if size > maxBytes {
		r.dropped++
		return
	}
	r.ents = append(r.ents, e)
	r.bytes += size
	for len(r.ents) > maxEvents || r.bytes > maxBytes {
		r.bytes -= r.ents[0].size()
		r.ents[0] = captured{} // let the data go
		r.ents = r.ents[1:]
		r.dropped++
	}
}

// subjectMatches matches a subject against a filter of filterSubjects: a
// subject, or a prefix ending in ">".
func subjectMatches(filter, subject string) bool {
	if prefix, ok := strings.CutSuffix(filter, ">"); ok {
		return strings.HasPrefix(subject, prefix) && len(subject) > len(prefix)
	}
	return filter == subject
}

// read marks a read and returns a copy of the buffer, oldest first,
// starting the capture when it is stopped.
func (c *capture) read(ctx context.Context) ([]captured, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, errClosed
	}
	c.lastRead = c.now()
	if c.buf != nil {
		return slices.Clone(c.buf.ents), nil
	}
	return nil, c.startLocked(ctx)
}

// startLocked subscribes to every event and waits until the server has
// registered the subscription: every event published on that server after
// read returns is captured.
func (c *capture) startLocked(ctx context.Context) error {
	buf := &ring{}
	sub, err := c.nc.Subscribe(topology.EventSubjects, func(m *nats.Msg) { c.add(buf, m) })
	if err != nil {
		return fmt.Errorf("subscribe to %s: %w", topology.EventSubjects, err)
	}
	if err := c.nc.FlushWithContext(ctx); err != nil {
		_ = sub.Unsubscribe()
		return fmt.Errorf("subscribe to %s: %w", topology.EventSubjects, err)
	}
	c.sub, c.buf = sub, buf
	c.starts++
	c.timer = time.AfterFunc(c.idle, func() { c.expire(buf) })
	c.log.Debug("event capture started", "idle", c.idle, "max_events", c.maxEvents, "max_bytes", c.maxBytes)
	return nil
}

// add keeps one event in buf, unless buf is no longer the running one.
func (c *capture) add(buf *ring, m *nats.Msg) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.buf != buf {
		return
	}
	buf.push(captured{subject: m.Subject, data: m.Data}, c.maxEvents, c.maxBytes)
}

// expire stops the run of buf if nobody read for idle, else checks again
// when idle will have passed since the last read.
func (c *capture) expire(buf *ring) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.buf != buf {
		return
	}
	if left := c.idle - c.now().Sub(c.lastRead); left > 0 {
		c.timer.Reset(left)
		return
	}
	c.log.Debug("event capture stopped: no read", "idle", c.idle)
	c.stopLocked()
}

// stopLocked unsubscribes and frees the buffer.
func (c *capture) stopLocked() {
	if c.buf == nil {
		return
	}
	c.timer.Stop()
	if err := c.sub.Unsubscribe(); err != nil && !errors.Is(err, nats.ErrConnectionClosed) {
		c.log.Debug("event capture: unsubscribe", "error", err)
	}
	c.sub, c.buf, c.timer = nil, nil, nil
}

// close stops the capture for good.
func (c *capture) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	c.stopLocked()
}

// captureState describes the capture (for tests).
type captureState struct {
	running bool
	events  int
	bytes   int64
	dropped uint64
	starts  uint64
}

func (c *capture) state() captureState {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := captureState{running: c.buf != nil, starts: c.starts}
	if c.buf != nil {
		st.events, st.bytes, st.dropped = len(c.buf.ents), c.buf.bytes, c.buf.dropped
	}
	return st
}
