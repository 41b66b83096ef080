package jobstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetgate/jetgate/jetstream/topology"
)

// PullNoWait asks a pull consumer of the ready stream for up to n messages
// without waiting: the messages it can deliver now, none if it has none.
//
// It is what jetstream.Consumer.FetchNoWait does, without its per-call
// subscription: FetchNoWait subscribes to a new inbox and unsubscribes
// again for every pull, two more protocol messages and two updates of the
// server's subscription list each time, on the path of every job. Here
// every pull of the Store answers on one wildcard inbox subscription,
// made on first use: a delivered message is routed to its request by the
// consumer named in its ack subject, the request's end (404, 408, 409 ...)
// by the inbox token, which is the consumer's name. So requests on one
// consumer are made one at a time; requests on different consumers run at
// once.
//
// A message that arrives for no request (its pull gave up on ctx) is put
// back at once (Nak).
func (s *Store) PullNoWait(ctx context.Context, consumer string, n int) ([]jetstream.Msg, error) {
	if n <= 0 {
		return nil, nil
	}
	mux, err := s.pulls.start(s.nc)
	if err != nil {
		return nil, Unavailable(err)
	}
	lock := mux.lock(consumer)
	lock.Lock()
	defer lock.Unlock()
	r := &pullReq{n: n, done: make(chan struct{})}
	mux.mu.Lock()
	mux.waiting[consumer] = r
	mux.mu.Unlock()
	defer mux.remove(consumer, r)
	body := `{"batch":` + strconv.Itoa(n) + `,"no_wait":true}`
	subj := "$JS.API.CONSUMER.MSG.NEXT." + topology.ReadyStream + "." + consumer
	if err := s.nc.PublishRequest(subj, mux.prefix+consumer, []byte(body)); err != nil {
		return nil, Unavailable(err)
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
	}
	select {
	case <-r.done:
	case <-ctx.Done():
		// What came so far is handed out; what comes later is put back.
		mux.mu.Lock()
		delete(mux.waiting, consumer)
		msgs := r.msgs
		mux.mu.Unlock()
		if len(msgs) > 0 {
			return msgs, nil
		}
		return nil, Unavailable(ctx.Err())
	}
	return r.msgs, r.err
}

// pullMux receives the answers of PullNoWait on one wildcard inbox.
type pullMux struct {
	once   sync.Once
	err    error
	nc     *nats.Conn
	prefix string
	locks  sync.Map // consumer -> *sync.Mutex

	mu      sync.Mutex
	waiting map[string]*pullReq // consumer -> the request in flight
}

// pullReq is one pull in flight. Its fields are written under the mux's
// lock by the subscription's callback until done is closed.
type pullReq struct {
	n    int
	msgs []jetstream.Msg
	err  error
	done chan struct{}
	over bool
}

func (m *pullMux) start(nc *nats.Conn) (*pullMux, error) {
	m.once.Do(func() {
		m.nc = nc
		m.prefix = nc.NewInbox() + "."
		m.waiting = map[string]*pullReq{}
		_, m.err = nc.Subscribe(m.prefix+"*", m.deliver)
	})
	return m, m.err
}

func (m *pullMux) lock(consumer string) *sync.Mutex {
	if l, ok := m.locks.Load(consumer); ok {
		return l.(*sync.Mutex)
	}
	l, _ := m.locks.LoadOrStore(consumer, &sync.Mutex{})
	return l.(*sync.Mutex)
}

func (m *pullMux) remove(consumer string, r *pullReq) {
	m.mu.Lock()
	if m.waiting[consumer] == r {
		delete(m.waiting, consumer)
	}
	m.mu.Unlock()
}

// finish ends r; the caller holds m.mu.
func (r *pullReq) finish(err error) {
	if r.over {
		return
	}
	r.over, r.err = true, err
	close(r.done)
}

// deliver handles one answer: a delivered message, or the status that ends
// a pull (404 no messages, 408 requests pending or timeout, 409 and others:
// errors).
func (m *pullMux) deliver(msg *nats.Msg) {
	if strings.HasPrefix(msg.Reply, "$JS.ACK.") {
		md, err := ParseAckReply(msg.Reply)
		if err != nil {
			return
		}
		pm := &pulledMsg{msg: msg, nc: m.nc, md: md}
		m.mu.Lock()
		r := m.waiting[md.Consumer]
		if r == nil || r.over {
			m.mu.Unlock()
			_ = pm.Nak() // its pull gave up
			return
		}
		r.msgs = append(r.msgs, pm)
		if len(r.msgs) >= r.n {
			r.finish(nil)
		}
		m.mu.Unlock()
		return
	}
	consumer := msg.Subject[strings.LastIndexByte(msg.Subject, '.')+1:]
	status := msg.Header.Get("Status")
	var err error
	switch status {
	case "100": // heartbeat; none is asked for
		return
	case "404", "408":
	default:
		err = fmt.Errorf("pull %s: status %s %s", consumer, status, msg.Header.Get("Description"))
	}
	m.mu.Lock()
	if r := m.waiting[consumer]; r != nil {
		r.finish(err)
	}
	m.mu.Unlock()
}

// ParseAckReply reads a JetStream ack subject:
// $JS.ACK.<stream>.<consumer>.<delivered>.<stream seq>.<consumer seq>.<ns>.<pending>,
// or the form with <domain>.<account hash> after $JS.ACK and a token at
// the end.
func ParseAckReply(reply string) (*jetstream.MsgMetadata, error) {
	t := strings.Split(reply, ".")
	if len(t) < 9 || t[0] != "$JS" || t[1] != "ACK" {
		return nil, fmt.Errorf("not a JetStream ack subject: %q", reply)
	}
	md := &jetstream.MsgMetadata{}
	if len(t) >= 11 {
		if t[2] != "_" {
			md.Domain = t[2]
		}
		t = t[4:]
	} else {
		t = t[2:]
	}
	md.Stream, md.Consumer = t[0], t[1]
	var nums [5]uint64
	for i := range nums {
		v, err := strconv.ParseUint(t[2+i], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("ack subject %q: %w", reply, err)
		}
		nums[i] = v
	}
	md.NumDelivered = nums[0]
	md.Sequence = jetstream.SequencePair{Stream: nums[1], Consumer: nums[2]}
	md.Timestamp = time.Unix(0, int64(nums[3]))
	md.NumPending = nums[4]
	return md, nil
}

// errAcked is the answer to a second final acknowledgement.
var errAcked = jetstream.ErrMsgAlreadyAckd

// pulledMsg is a message delivered to PullNoWait.
type pulledMsg struct {
	msg   *nats.Msg
	nc    *nats.Conn
	md    *jetstream.MsgMetadata
	acked atomic.Bool
}

var _ jetstream.Msg = (*pulledMsg)(nil)

func (m *pulledMsg) Metadata() (*jetstream.MsgMetadata, error) {
	md := *m.md
	return &md, nil
}

func (m *pulledMsg) Data() []byte         { return m.msg.Data }
func (m *pulledMsg) Headers() nats.Header { return m.msg.Header }
func (m *pulledMsg) Subject() string      { return m.msg.Subject }
func (m *pulledMsg) Reply() string        { return m.msg.Reply }

// final sends a final acknowledgement once.
func (m *pulledMsg) final(body string) error {
	if m.acked.Swap(true) {
		return errAcked
	}
	return m.nc.Publish(m.msg.Reply, []byte(body))
}

func (m *pulledMsg) Ack() error  { return m.final("+ACK") }
func (m *pulledMsg) Nak() error  { return m.final("-NAK") }
func (m *pulledMsg) Term() error { return m.final("+TERM") }

func (m *pulledMsg) NakWithDelay(d time.Duration) error {
	return m.final(`-NAK {"delay": ` + strconv.FormatInt(d.Nanoseconds(), 10) + `}`)
}

func (m *pulledMsg) TermWithReason(reason string) error {
	return m.final("+TERM " + reason)
}

func (m *pulledMsg) InProgress() error {
	if m.acked.Load() {
		return errAcked
	}
	return m.nc.Publish(m.msg.Reply, []byte("+WPI"))
}

// DoubleAck acknowledges and waits for the server to confirm it.
func (m *pulledMsg) DoubleAck(ctx context.Context) error {
	if m.acked.Swap(true) {
		return errAcked
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
	}
	if _, err := m.nc.RequestWithContext(ctx, m.msg.Reply, []byte("+ACK")); err != nil {
		m.acked.Store(false)
		if errors.Is(err, context.DeadlineExceeded) {
			return Unavailable(err)
		}
		return err
	}
	return nil
}
