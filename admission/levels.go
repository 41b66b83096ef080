package admission

import (
	"context"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetgate/jetgate/jetstream/topology"
)

// A no-wait pull on a level consumer is answered from the consumer's
// cached count of pending messages, and nats-server updates that count
// asynchronously: now and then it reads zero while the level holds
// messages no one has been handed, and the pull comes back empty. A fetch
// would then fall through to a lower priority level, or answer empty,
// with a higher-priority job ready (PRI-004). So an empty no-wait pull is
// checked against the stream itself: the consumer's delivered sequence,
// then the next message of the level's subject after it. If there is one,
// a pull that waits (recheckWait at most) is answered from the stream, not
// from the count. A level that only holds messages this process already
// handed out (jobs being claimed or held, see lease.go) costs one look-up
// (nothing after the last sequence it was handed) and no wait.

// recheckWait bounds the pull after an empty no-wait pull on a level that
// holds an undelivered message. The server answers it as soon as it has
// delivered the message; the bound only matters when another fetch took
// the message in between.
const recheckWait = 50 * time.Millisecond

// levelSeen is the highest stream sequence this process was handed by a
// level consumer: messages up to it were delivered, so the stream is only
// asked about later ones. Other processes' deliveries are not in it; the
// consumer's own delivered sequence settles those.
type levelSeen struct {
	cons jetstream.Consumer
	seq  uint64
}

// afterLevelPull follows a no-wait pull on a level: it notes the sequences
// handed out and, when the pull came back empty, rechecks the level
// against the stream.
func (s *Service) afterLevelPull(ctx context.Context, cons jetstream.Consumer, queue string, prio int, msgs []jetstream.Msg) []jetstream.Msg {
	name := topology.ReadyConsumer(queue, prio)
	var seen uint64
	if v, ok := s.seen.Load(name); ok && v.(levelSeen).cons == cons {
		seen = v.(levelSeen).seq
	}
	recheck := len(msgs) == 0
	if recheck {
		msgs = s.recheckLevel(ctx, cons, queue, prio, seen)
	}
	last := seen
	for _, m := range msgs {
		if md, err := m.Metadata(); err == nil {
			last = max(last, md.Sequence.Stream)
		}
	}
	if last != seen {
		s.seen.Store(name, levelSeen{cons: cons, seq: last})
	}
	s.track(name, msgs, recheck) // levelpull.go
	return msgs
}

// recheckLevel pulls one message from a level whose no-wait pull came back
// empty, if the stream says the consumer has one to deliver: a message of
// the level after seen, then after the consumer's delivered sequence.
func (s *Service) recheckLevel(ctx context.Context, cons jetstream.Consumer, queue string, prio int, seen uint64) []jetstream.Msg {
	subj := topology.ReadyLevelFilter(queue, prio)
	if _, err := s.assets.Ready.GetMsg(ctx, seen+1, jetstream.WithGetMsgSubject(subj)); err != nil {
		return nil
	}
	if _, ok := s.nextUndelivered(ctx, cons, queue, prio); !ok {
		return nil
	}
	batch, err := cons.Fetch(1, jetstream.FetchMaxWait(recheckWait))
	if err != nil {
		return nil
	}
	var msgs []jetstream.Msg
	for msg := range batch.Messages() {
		msgs = append(msgs, msg)
	}
	return msgs
}

// nextUndelivered returns the stream timestamp of the next message the
// level's consumer has not delivered yet, read from the stream (ok false
// when there is none, or on error).
func (s *Service) nextUndelivered(ctx context.Context, cons jetstream.Consumer, queue string, prio int) (time.Time, bool) {
	info, err := cons.Info(ctx)
	if err != nil {
		// Removed while idle: the next fetch creates it again.
		s.consumers.Delete(topology.ReadyConsumer(queue, prio))
		return time.Time{}, false
	}
	msg, err := s.assets.Ready.GetMsg(ctx, info.Delivered.Stream+1,
		jetstream.WithGetMsgSubject(topology.ReadyLevelFilter(queue, prio)))
	if err != nil {
		return time.Time{}, false
	}
	return msg.Time, true
}
