package admission

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetgate/jetgate/jetstream/jobstore"
	"github.com/jetgate/jetgate/jetstream/topology"
)

// Arrival order of blocked producers (the block strategy, ojs-backpressure
// 5.2) across processes.
//
// A producer that finds its queue full takes a ticket: a message on
// ojs.blocked.<queue> in OJS_BLOCKED, whose stream sequence is its place in
// line and whose header carries the time its producer gives up. Only the
// holder of the oldest ticket of a queue tries for room; the others wait.
// A producer takes its ticket back when it is served or gives up, and
// announces it on the queue's freed subject, so the next in line (in any
// process) looks again. In each process the waiters are kept in ticket
// order and only the first is woken, and it wakes the next when it leaves:
// a freed notice costs one head lookup per process, not one per waiter.
// A process that stops first ends its producers' waits (EndBlocking):
// each takes its ticket back and is answered that the server shuts down.
//
// A ticket whose producer died stays until its deadline: a waiter behind
// it sets a timer for that deadline (plus ticketGrace) and then deletes
// it. The stream keeps tickets for at most ticketMaxAge in any case, and in
// memory: after a server restart the line is simply gone, and the waiters
// try for room as if first.

const (
	// ticketGrace is how long past its deadline a ticket is left to its
	// producer before another deletes it.
	ticketGrace = 2 * time.Second
	// ticketMaxAge bounds any ticket's life in the stream.
	ticketMaxAge = time.Hour
	// headerTicketDeadline is the Unix time in nanoseconds a ticket's
	// producer gives up; headerTicketJobs how many jobs it waits to put.
	headerTicketDeadline = "Ojs-Ticket-Deadline"
	headerTicketJobs     = "Ojs-Ticket-Jobs"
)

// waiter is a producer of this process blocked on a full queue; seq is its
// ticket.
type waiter struct {
	ch  chan struct{}
	seq uint64
}

// ticket is the head of a queue's line.
type ticket struct {
	seq      uint64
	deadline time.Time
}

// tickets is this process's handle of OJS_BLOCKED.
type tickets struct {
	mu     sync.Mutex
	stream jetstream.Stream
}

// ticketStream returns OJS_BLOCKED, creating it on first use.
func (s *Service) ticketStream(ctx context.Context) (jetstream.Stream, error) {
	t := &s.bp.tickets
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stream != nil {
		return t.stream, nil
	}
	st, err := s.sideStream(ctx, jetstream.StreamConfig{
		Name:        topology.BlockedStream,
		Description: "jetgate tickets of producers blocked on full queues: the line they are served in",
		Subjects:    []string{topology.BlockedSubjects},
		MaxAge:      ticketMaxAge,
		Storage:     jetstream.MemoryStorage,
	})
	if err != nil {
		return nil, err
	}
	t.stream = st
	return st, nil
}

// nobodyWaiting reports whether no producer, here or in another process,
// waits for room in q.
func (s *Service) nobodyWaiting(ctx context.Context, q *bpQueue) (bool, error) {
	q.mu.Lock()
	local, seen := len(q.waiters), q.ticketsSeen
	q.mu.Unlock()
	if local > 0 {
		return false, nil
	}
	head, err := s.headTicket(ctx, q)
	if err == nil && head.seq == 0 {
		// The line was empty, and stays known so until a ticket is seen
		// (calm); one seen during the read may not have been in it.
		q.mu.Lock()
		q.lineClear = q.ticketsSeen == seen
		q.mu.Unlock()
	}
	return head.seq == 0, err
}

// enterTicket takes a ticket for a producer that gives up at deadline and
// puts it in this process's line.
func (s *Service) enterTicket(ctx context.Context, q *bpQueue, deadline time.Time, jobs int) (*waiter, error) {
	if _, err := s.ticketStream(ctx); err != nil {
		return nil, err
	}
	m := nats.NewMsg(topology.BlockedSubject(q.name))
	m.Header.Set(headerTicketDeadline, strconv.FormatInt(deadline.UnixNano(), 10))
	m.Header.Set(headerTicketJobs, strconv.Itoa(jobs))
	ack, err := s.js.PublishMsg(ctx, m)
	if err != nil {
		return nil, fmt.Errorf("wait for room in queue %s: %w", q.name, jobstore.Unavailable(err))
	}
	w := &waiter{ch: make(chan struct{}, 1), seq: ack.Sequence}
	q.mu.Lock()
	i, _ := slices.BinarySearchFunc(q.waiters, w.seq, func(o *waiter, seq uint64) int {
		switch {
		case o.seq < seq:
			return -1
		case o.seq > seq:
			return 1
		}
		return 0
	})
	q.waiters = slices.Insert(q.waiters, i, w)
	q.mu.Unlock()
	return w, nil
}

// leaveTicket takes w's ticket back and lets the next in line look again:
// in this process directly, in others through the freed notice.
func (s *Service) leaveTicket(q *bpQueue, w *waiter) {
	q.leave(w)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s.dropTicket(ctx, q, w.seq)
	_ = s.nc.Publish(topology.FreedSubject(q.name), nil)
}

// dropTicket deletes a ticket (idempotent).
func (s *Service) dropTicket(ctx context.Context, q *bpQueue, seq uint64) {
	st, err := s.ticketStream(ctx)
	if err != nil {
		return
	}
	if err := st.DeleteMsg(ctx, seq); err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) && !isNoMessage(err) {
		s.log.Warn("drop blocked producer's ticket", "queue", q.name, "seq", seq, "error", err)
	}
}

// headTicket returns the oldest ticket of q's line; seq 0 when the line is
// empty.
func (s *Service) headTicket(ctx context.Context, q *bpQueue) (ticket, error) {
	st, err := s.ticketStream(ctx)
	if err != nil {
		return ticket{}, err
	}
	raw, err := st.GetMsg(ctx, 1, jetstream.WithGetMsgSubject(topology.BlockedSubject(q.name)))
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
		return ticket{}, nil
	case err != nil:
		return ticket{}, fmt.Errorf("wait for room in queue %s: %w", q.name, jobstore.Unavailable(err))
	}
	ns, _ := strconv.ParseInt(raw.Header.Get(headerTicketDeadline), 10, 64)
	return ticket{seq: raw.Sequence, deadline: time.Unix(0, ns)}, nil
}
