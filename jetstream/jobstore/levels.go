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

// Batched direct gets (ADR-31): a request answered by several messages,
// one per match, then an end-of-batch marker. Fetches no longer use them
// (ready levels come from the level registry and the level consumers,
// registry.go and admission/levels.go); they serve lookups by subject.

var errTooManyResults = errors.New("too many subjects for one batched direct get")

// subjectLevel reads the priority level of a ready subject.
func subjectLevel(subj string) (int, bool) {
	_, p, ok := topology.ReadyLevelOf(subj)
	return p, ok
}

// batchedGet sends a batched direct get (ADR-31) with body to stream and
// waits for its whole answer: the levels of the messages.
func (s *Store) batchedGet(ctx context.Context, stream, body string) (*multiReq, error) {
	mux, err := s.replies.start(s.nc)
	if err != nil {
		return nil, err
	}
	req := mux.add()
	defer mux.remove(req)
	if err := s.nc.PublishRequest("$JS.API.DIRECT.GET."+stream, req.inbox, []byte(body)); err != nil {
		return nil, err
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
	}
	select {
	case <-req.done:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return req, req.err
}

// replyMux receives the answers of requests answered by several messages
// (batched direct gets) on one wildcard inbox subscription, made on first
// use, and routes them to the waiting request by the inbox's last token.
type replyMux struct {
	once   sync.Once
	err    error
	prefix string
	seq    atomic.Uint64

	mu      sync.Mutex
	waiting map[string]*multiReq
}

// multiReq is one batched direct get in flight. Its fields are written
// by the subscription's callback only, and read after done is closed.
type multiReq struct {
	token  string
	inbox  string
	levels []int
	err    error
	done   chan struct{}
}

func (m *replyMux) start(nc *nats.Conn) (*replyMux, error) {
	m.once.Do(func() {
		m.prefix = nc.NewInbox() + "."
		m.waiting = map[string]*multiReq{}
		_, m.err = nc.Subscribe(m.prefix+"*", m.deliver)
	})
	return m, m.err
}

func (m *replyMux) add() *multiReq {
	token := strconv.FormatUint(m.seq.Add(1), 36)
	r := &multiReq{token: token, inbox: m.prefix + token, done: make(chan struct{})}
	m.mu.Lock()
	m.waiting[token] = r
	m.mu.Unlock()
	return r
}

func (m *replyMux) remove(r *multiReq) {
	m.mu.Lock()
	delete(m.waiting, r.token)
	m.mu.Unlock()
}

// deliver handles one answer: a level's last message, the end of the
// batch (204), no subject at all (404), or an error status.
func (m *replyMux) deliver(msg *nats.Msg) {
	token := msg.Subject[strings.LastIndexByte(msg.Subject, '.')+1:]
	m.mu.Lock()
	r := m.waiting[token]
	m.mu.Unlock()
	if r == nil {
		return // the request gave up
	}
	status := msg.Header.Get("Status")
	switch status {
	case "":
		if p, ok := subjectLevel(msg.Header.Get(jetstream.SubjectHeader)); ok {
			r.levels = append(r.levels, p)
		}
		return
	case "204": // end of batch
	case "404":
		// No Results (multi_last), Message Not Found (next by subject):
		// nothing there.
		if d := msg.Header.Get("Description"); d != "No Results" && d != "Message Not Found" {
			r.err = fmt.Errorf("batched direct get: status 404 %s", d)
		}
	case "413":
		r.err = errTooManyResults
	default:
		r.err = fmt.Errorf("batched direct get: status %s %s", status, msg.Header.Get("Description"))
	}
	m.mu.Lock()
	delete(m.waiting, token)
	m.mu.Unlock()
	close(r.done)
}
