package dashboard

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/jetgate/jetgate/admission/ojs"
)

// hub feeds every open stream of one Dashboard from one goroutine (its
// feeder): a snapshot every Interval and the new events every
// EventInterval, each read once and sent to all streams, so the cost does
// not grow with the number of open pages. The feeder runs only while at
// least one stream is open; the first stream starts it and it stops after
// the tick that finds none, or on stop.
type hub struct {
	d *Dashboard

	mu      sync.Mutex
	subs    map[*subscriber]struct{}
	running bool
	stopped bool
	cancel  context.CancelFunc
	last    []byte // the feeder's last snapshot frame, for new streams
	wg      sync.WaitGroup
}

// subscriber is one open stream: frames to write, and gone, closed when
// the hub dropped it (too slow to read) so its handler ends; the browser
// reconnects and starts again from a snapshot.
type subscriber struct {
	ch   chan []byte
	gone chan struct{}
}

// subscriberBuffer is how many frames a stream may fall behind (~8 s of
// snapshots) before it is dropped.
const subscriberBuffer = 16

func newHub(d *Dashboard) *hub { return &hub{d: d, subs: map[*subscriber]struct{}{}} }

// subscribe opens a stream; false once the hub is stopped.
func (h *hub) subscribe() (*subscriber, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.stopped {
		return nil, false
	}
	s := &subscriber{ch: make(chan []byte, subscriberBuffer), gone: make(chan struct{})}
	h.subs[s] = struct{}{}
	if h.running && h.last != nil {
		s.ch <- h.last
	}
	if !h.running {
		h.running = true
		ctx, cancel := context.WithCancel(context.Background())
		h.cancel = cancel
		h.wg.Add(1)
		go func() {
			defer h.wg.Done()
			defer cancel()
			h.feed(ctx)
		}()
	}
	return s, true
}

func (h *hub) unsubscribe(s *subscriber) {
	h.mu.Lock()
	delete(h.subs, s)
	h.mu.Unlock()
}

// stop ends the feeder and refuses new streams; open streams end through
// Dashboard.closed. It waits for the feeder.
func (h *hub) stop() {
	h.mu.Lock()
	h.stopped = true
	if h.cancel != nil {
		h.cancel()
	}
	h.mu.Unlock()
	h.wg.Wait()
}

// keepGoing reports whether the feeder should go on; when no stream is
// left it marks the feeder stopped, under the lock, so the next subscribe
// starts a new one.
func (h *hub) keepGoing(ctx context.Context) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if ctx.Err() == nil && !h.stopped && len(h.subs) > 0 {
		return true
	}
	h.running, h.last = false, nil
	return false
}

// broadcast queues frame on every stream, dropping the streams that are
// too far behind.
func (h *hub) broadcast(frame []byte, snapshot bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if snapshot {
		h.last = frame
	}
	for s := range h.subs {
		select {
		case s.ch <- frame:
		default:
			delete(h.subs, s)
			close(s.gone)
		}
	}
}

// feed is the feeder goroutine.
func (h *hub) feed(ctx context.Context) {
	cfg := h.d.cfg
	snaps := time.NewTicker(cfg.Interval)
	defer snaps.Stop()
	evTicks := time.NewTicker(cfg.EventInterval)
	defer evTicks.Stop()
	var ev eventFeed
	ev.poll(ctx, h)
	h.sendSnapshot(ctx, &ev)
	for h.keepGoing(ctx) {
		select {
		case <-ctx.Done():
		case <-snaps.C:
			h.sendSnapshot(ctx, &ev)
		case <-evTicks.C:
			ev.poll(ctx, h)
		}
	}
}

// sendSnapshot reads a snapshot, with the events of the last poll, and
// sends it to every stream.
func (h *hub) sendSnapshot(parent context.Context, ev *eventFeed) {
	ctx, cancel := context.WithTimeout(parent, h.d.cfg.Timeout)
	defer cancel()
	s := h.d.state(ctx)
	if parent.Err() != nil {
		return // stopping
	}
	s.Events = ev.last
	if ev.err != nil {
		s.Errors = append(s.Errors, "events: "+ev.err.Error())
	}
	b, err := s.MarshalJSON()
	if err != nil {
		h.d.log.Error("encode dashboard snapshot", "error", err)
		return
	}
	h.broadcast(frame("snapshot", b), true)
}

// eventFeed finds the new events between two polls: those of the newest
// MaxEvents not seen by the previous poll (so at most MaxEvents per poll).
type eventFeed struct {
	seen  map[string]bool
	last  []ojs.Event
	err   error
	ready bool
}

func (f *eventFeed) poll(ctx context.Context, h *hub) {
	ctx, cancel := context.WithTimeout(ctx, h.d.cfg.Timeout)
	defer cancel()
	evs, err := h.d.recentEvents(ctx)
	f.err = err
	if err != nil {
		return
	}
	var fresh []ojs.Event
	seen := make(map[string]bool, len(evs))
	for _, e := range evs {
		seen[e.ID] = true
		if f.ready && !f.seen[e.ID] {
			fresh = append(fresh, e)
		}
	}
	f.seen, f.last, f.ready = seen, evs, true
	if len(fresh) == 0 {
		return
	}
	b, err := json.Marshal(fresh)
	if err != nil {
		h.d.log.Error("encode dashboard events", "error", err)
		return
	}
	h.broadcast(frame("events", b), false)
}

func frame(event string, data []byte) []byte {
	return fmt.Appendf(make([]byte, 0, len(data)+32), "event: %s\ndata: %s\n\n", event, data)
}

// stream is GET /dashboard/stream, server-sent events: "snapshot" (a
// Snapshot) at once and every Interval, "events" (a JSON array of new
// events, newest first) as the feeder finds them. It ends when the client
// goes, when the server shuts down (Close), or when the client falls too
// far behind; EventSource then reconnects after the retry delay.
func (d *Dashboard) stream(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	if r.Method == http.MethodHead {
		return
	}
	sub, ok := d.hub.subscribe()
	if !ok {
		h.Del("Content-Type")
		h.Set("Retry-After", "1")
		writeError(w, http.StatusServiceUnavailable, ojs.CodeBackendError, "the server is shutting down")
		return
	}
	defer d.hub.unsubscribe(sub)
	rc := http.NewResponseController(w)
	w.WriteHeader(http.StatusOK)
	if _, err := fmt.Fprint(w, "retry: 2000\n\n"); err != nil || rc.Flush() != nil {
		return
	}
	for {
		select {
		case <-r.Context().Done():
			return
		case <-d.closed:
			return
		case <-sub.gone:
			return
		case f := <-sub.ch:
			if _, err := w.Write(f); err != nil || rc.Flush() != nil {
				return
			}
		}
	}
}
