package events

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetgate/jetgate/admission/ojs"
	"github.com/jetgate/jetgate/jetstream/topology"
)

// Limits of Recent.
const (
	DefaultRecentLimit = 100
	MaxRecentLimit     = 1000
)

const (
	// fetchBatch caps the messages of one pull request.
	fetchBatch = 256
	// maxWindow caps the sequences one backward step may cover.
	maxWindow = 1 << 20
	// readerInactive removes a reader's consumer if its delete got lost.
	readerInactive = 30 * time.Second
	// deleteTimeout bounds the delete of a reader's consumer.
	deleteTimeout = 2 * time.Second
)

// Recent returns the most recent events, newest first, at most q.Limit of
// them (default 100, at most 1000). q.Types keeps only the given types; a
// type "job.*" keeps every job event and "*" keeps everything. q.Since
// drops events whose time is before it; q.Queues and q.JobTypes keep the
// events whose data names one of them (q.Match).
//
// With Config.Stream it reads the event stream (recentStream). Without, it
// reads the capture, and a call that finds the capture stopped starts it
// and answers what arrived since, usually nothing: other processes' events
// published before it, or while the capture was stopped, are not listed.
// Either is merged with the Publisher's own events (mergeNewest): newest
// first, each event once, the filters and the limit applied to the whole.
func (p *Publisher) Recent(ctx context.Context, q ojs.EventQuery) ([]ojs.Event, error) {
	if p == nil {
		return []ojs.Event{}, nil
	}
	ctx, cancel := withDefaultTimeout(ctx)
	defer cancel()
	limit := q.Limit
	if limit <= 0 {
		limit = DefaultRecentLimit
	}
	limit = min(limit, MaxRecentLimit)
	var src eventSource
	if p.cap != nil {
		ents, err := p.cap.read(ctx)
		if err != nil {
			return nil, err
		}
		src = newNewest(ents, q, p.skipMalformed)
	} else {
		evs, err := p.recentStream(ctx, q, limit)
		if err != nil {
			return nil, err
		}
		src = &listed{evs: evs}
	}
	if p.own == nil {
		return mergeNewest(limit, src), nil
	}
	// Read after the capture or the stream, so that the ring is at least
	// as recent as they are.
	return mergeNewest(limit, src, p.own.source(p, q)), nil
}

// skipMalformed logs a message of the capture that is not an OJS event.
func (p *Publisher) skipMalformed(subject string, err error) {
	p.cfg.Logger.Debug("skipping malformed event", "subject", subject, "error", err)
}

// recentStream reads the tail of the stream, never the whole stream: it
// reads a window of the last Limit sequences through a short-lived
// consumer filtered by the types' subjects and, while too few events
// matched, steps further back with a window sized by the density of
// matches seen so far. With Since, a consumer started at that time counts
// the matching events first; when they fit in Limit they are all read in
// one pass, else Since only bounds the backward steps.
//
// The error wraps jetstream.ErrStreamNotFound when Ensure was never run.
func (p *Publisher) recentStream(ctx context.Context, q ojs.EventQuery, limit int) ([]ojs.Event, error) {
	stream, err := p.js.Stream(ctx, topology.EventStream)
	if err != nil {
		return nil, fmt.Errorf("get stream %s: %w", topology.EventStream, err)
	}
	r := &recentReader{
		p:       p,
		stream:  stream,
		filters: filterSubjects(q.Types),
		since:   q.Since,
		q:       q,
		limit:   limit,
	}
	r.out = make([]ojs.Event, 0, r.limit)
	st := stream.CachedInfo().State
	if st.Msgs == 0 {
		return r.out, nil
	}
	if err := r.run(ctx, st.FirstSeq, st.LastSeq); err != nil {
		return nil, err
	}
	return r.out, nil
}

// recentReader collects the newest events of the stream for one Recent.
type recentReader struct {
	p       *Publisher
	stream  jetstream.Stream
	filters []string
	since   time.Time
	q       ojs.EventQuery // applied to each event read (Match)
	limit   int
	out     []ojs.Event // newest first
}

// window is an ephemeral consumer reading one range of the stream.
type window struct {
	cons    jetstream.Consumer
	start   uint64 // first stream sequence it may deliver
	pending uint64 // matching messages from start to the stream's end
}

func (r *recentReader) run(ctx context.Context, first, last uint64) error {
	floor, end := first, last
	if !r.since.IsZero() {
		w, err := r.open(ctx, 0)
		if err != nil {
			return err
		}
		floor = max(floor, w.start)
		if w.pending <= uint64(r.limit) {
			evs, _, err := r.read(ctx, w, math.MaxUint64, w.pending)
			r.close(ctx, w)
			r.add(evs)
			return err
		}
		r.close(ctx, w)
	}
	size, prevPending := uint64(r.limit), uint64(0)
	for end >= floor && len(r.out) < r.limit {
		start := floor
		if end-floor >= size {
			start = end - size + 1
		}
		w, err := r.open(ctx, start)
		if err != nil {
			return err
		}
		// Matches newer than end were counted by the previous window.
		budget := w.pending - min(prevPending, w.pending)
		evs, matched, err := r.read(ctx, w, end, budget)
		r.close(ctx, w)
		if err != nil {
			return err
		}
		r.add(evs)
		if start == floor {
			break
		}
		end, prevPending = start-1, w.pending
		size = nextSize(size, matched, r.limit-len(r.out))
	}
	return nil
}

// nextSize sizes the next backward window so that, at the density of
// matches seen in the last one, it holds the need events still missing.
func nextSize(size, matched uint64, need int) uint64 {
	next := size * 8
	if matched > 0 {
		next = size * uint64(need) / matched
		next += next/4 + 1
		next = min(next, size*16)
	}
	return min(next, maxWindow)
}

// open creates the consumer of a window starting at seq, or at r.since
// when seq is 0.
func (r *recentReader) open(ctx context.Context, seq uint64) (*window, error) {
	cfg := jetstream.ConsumerConfig{
		Description:       "jetgate: read recent events",
		AckPolicy:         jetstream.AckNonePolicy,
		MemoryStorage:     true,
		Replicas:          1,
		InactiveThreshold: readerInactive,
		DeliverPolicy:     jetstream.DeliverByStartSequencePolicy,
		OptStartSeq:       seq,
	}
	if seq == 0 {
		since := r.since
		cfg.DeliverPolicy, cfg.OptStartSeq, cfg.OptStartTime = jetstream.DeliverByStartTimePolicy, 0, &since
	}
	if len(r.filters) == 1 {
		cfg.FilterSubject = r.filters[0]
	} else {
		cfg.FilterSubjects = r.filters
	}
	cons, err := r.stream.CreateConsumer(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("create event reader: %w", err)
	}
	info := cons.CachedInfo()
	return &window{cons: cons, start: info.Delivered.Stream + 1, pending: info.NumPending}, nil
}

// read pulls up to budget messages of w, stopping at the first one past
// end or at the stream's tail. It returns the events that match the
// query, oldest first, and how many they are.
func (r *recentReader) read(ctx context.Context, w *window, end, budget uint64) ([]ojs.Event, uint64, error) {
	c := chunk{end: end}
	for budget > 0 {
		got, more, err := r.fetch(ctx, w, &c, int(min(budget, fetchBatch)))
		if err != nil || !more {
			return c.evs, c.matched, err
		}
		budget -= min(uint64(got), budget)
	}
	return c.evs, c.matched, nil
}

// chunk accumulates what read found.
type chunk struct {
	end     uint64
	evs     []ojs.Event
	matched uint64
}

// fetch pulls up to n messages of w in one pull request and reports how
// many arrived and whether more may follow: none was past c.end and the
// tail was not reached. The request waits for its n messages until ctx's
// deadline (nats.go's FetchNoWait gives up after one second, too soon for
// a busy server); it is cut short, by cancelling it, at the first message
// past c.end or at the message after which nothing matching is pending.
func (r *recentReader) fetch(ctx context.Context, w *window, c *chunk, n int) (int, bool, error) {
	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	batch, err := w.cons.Fetch(n, jetstream.FetchContext(fctx))
	if err != nil {
		return 0, false, fmt.Errorf("fetch events: %w", err)
	}
	got, more := 0, true
	for msg := range batch.Messages() {
		if !more {
			continue // drain what arrived before the cancel
		}
		got++
		r.p.read.Add(1)
		meta, err := msg.Metadata()
		if err != nil {
			continue
		}
		if meta.Sequence.Stream > c.end {
			more = false
			cancel()
			continue
		}
		// Only kept events count: the next window is sized by their
		// density, which filters on data (queues, job types) lower.
		if ev, ok := r.decode(msg.Data()); ok {
			c.matched++
			c.evs = append(c.evs, ev)
		}
		if meta.NumPending == 0 {
			more = false
			cancel()
		}
	}
	// Once stopped on purpose, the cancel is the only error left to see.
	if err := batch.Error(); err != nil && more {
		return got, false, fmt.Errorf("fetch events: %w", err)
	}
	// A request that ended empty without an error (a 404/408 status from
	// the server) means nothing more can be read.
	return got, more && got > 0, nil
}

// decode parses one stored event; messages that are not OJS envelopes, and
// events the query does not match, are skipped.
func (r *recentReader) decode(data []byte) (ojs.Event, bool) {
	var ev ojs.Event
	if err := json.Unmarshal(data, &ev); err != nil || ev.Type == "" || ev.SpecVersion == "" {
		r.p.cfg.Logger.Debug("skipping malformed event", "error", err)
		return ev, false
	}
	if !r.q.Match(ev) {
		return ev, false
	}
	return ev, true
}

// add appends evs (oldest first) newest first until the limit is reached.
func (r *recentReader) add(evs []ojs.Event) {
	for i := len(evs) - 1; i >= 0 && len(r.out) < r.limit; i-- {
		r.out = append(r.out, evs[i])
	}
}

// close deletes a window's consumer, even when ctx is done; a consumer
// whose delete fails goes away after readerInactive.
func (r *recentReader) close(ctx context.Context, w *window) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), deleteTimeout)
	defer cancel()
	name := w.cons.CachedInfo().Name
	if err := r.stream.DeleteConsumer(ctx, name); err != nil {
		r.p.cfg.Logger.Debug("delete event reader", "consumer", name, "error", err)
	}
}

// filterSubjects turns event types into the subject filters of a reader:
// nil (everything) when types is empty or holds "*"; "job.*" becomes the
// wildcard ojs.events.job.>. Filters covered by a wildcard are dropped,
// since a consumer's filters must not overlap.
func filterSubjects(types []string) []string {
	var exact, wild []string
	for _, t := range types {
		t = strings.TrimSpace(t)
		switch {
		case t == "":
		case t == "*" || t == ">":
			return nil
		case strings.HasSuffix(t, ".*"):
			wild = append(wild, topology.EventSubject(strings.TrimSuffix(t, ".*"))+".")
		default:
			exact = append(exact, topology.EventSubject(t))
		}
	}
	covered := func(s string, self int) bool {
		for i, w := range wild {
			if i != self && strings.HasPrefix(s, w) && (s != w || i < self) {
				return true
			}
		}
		return false
	}
	var out []string
	for i, w := range wild {
		if !covered(w, i) {
			out = append(out, w+">")
		}
	}
	for _, s := range exact {
		if !covered(s+".", -1) {
			out = append(out, s)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}
