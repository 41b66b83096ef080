package admission

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetgate/jetgate/jetstream/jobstore"
	"github.com/jetgate/jetgate/jetstream/topology"
)

// Which levels of a queue hold ready jobs.
//
// Ready subjects end with the job id, so any request that matches a
// queue's or a level's subjects with a wildcard walks one subject per
// ready job (jetstream/jobstore/doc.go). Levels are therefore never looked
// up in the stream. The levels a queue has used are registered in its
// record (jobstore/registry.go); a fetch asks those levels' consumers for
// their info, in parallel, and takes each one's count of pending plus
// ack-pending messages, which the server keeps as messages come and go:
// flat in the number of jobs. A level whose pending count is 0 but whose
// ack-pending count is not may hold messages put back (Nak), so it is
// pulled too. A queue with one registered level is pulled directly,
// without asking. A queue with more than 16 levels reads all its levels'
// counts from one page of the stream's consumer list (listLevels) and
// reuses them for 10 ms (levelpull.go).
//
// A no-wait pull on a level consumer is answered from the consumer's
// count of pending messages, and nats-server updates that count
// asynchronously after a publish: for a moment it reads zero while the
// level holds a message no one has been handed, and a pull (or a consumer
// info) comes back empty. On a cluster the moment is longer: the
// consumer's leader reads its own replica of the stream, which may apply
// a message tens of milliseconds after the stream's leader acknowledged
// its publish. A fetch would then fall through to a lower priority
// level, or answer empty, with a higher-priority job ready (PRI-004). The
// stream is not asked on every pull (a read that matches a level's
// subjects walks one subject per message stored there): jobstore notes,
// per level, the highest stream sequence of this process's own ready
// publishes, and a fetch that would answer empty asks the stream for what
// other processes stored (visible.go). A level known to hold a message stored
// after the last message this process was handed from it (levelSeen)
// counts as holding one (unseen); when its no-wait pull comes back empty
// and the consumer's delivered sequence is still below that message, a
// pull waits for it (recheckWait), again while the consumer has not
// delivered it and the stream still holds it, for lagWait at most; then
// the message counts as seen: each costs at most one such wait, and the
// wait ends as soon as the server delivers. A message this process put
// back with a plain Nak (a failed claim) is waited for once the same way:
// the server takes the Nak in asynchronously, and a pull can come first.
// (The messages a pull puts back in levelpull.go wait for the server's
// answer to their Naks instead.)

// recheckWait bounds one pull after an empty no-wait pull on a level known
// to hold a message stored after the last one this process was handed.
// The server answers it as soon as its count has caught up; the bound only
// matters when the message went away meanwhile (taken by another process,
// cancelled), which the consumer's info and the stream then tell.
const recheckWait = 20 * time.Millisecond

// lagWait bounds the waits for one such message: how far a cluster's
// consumer leader may trail the stream's leader before a fetch gives up
// on a message it knows is stored and answers without it.
const lagWait = 2 * time.Second

// levelSeen is the highest stream sequence this process was handed by a
// level consumer, or waited for after publishing it (recheckLevel).
// Other processes' deliveries are not in it; the consumer's own delivered
// sequence settles those.
type levelSeen struct {
	cons jetstream.Consumer
	seq  uint64
}

// seenSeq returns a level's levelSeen sequence (0: none).
func (s *Service) seenSeq(queue string, prio int) uint64 {
	if v, ok := s.seen.Load(topology.ReadyConsumer(queue, prio)); ok {
		return v.(levelSeen).seq
	}
	return 0
}

// unseen reports whether a level holds a message stored after the last
// one this process was handed from it, as far as this process knows: one
// it published itself, or one its last look at the stream found
// (visible.go). Its consumer may not count that message yet.
func (s *Service) unseen(queue string, prio int) bool {
	return s.knownSeq(queue, prio) > s.seenSeq(queue, prio)
}

// knownSeq is the highest stream sequence of a ready message this process
// knows to be stored at a level: its own publishes there, and what its
// last look at the stream found (visible.go).
func (s *Service) knownSeq(queue string, prio int) uint64 {
	seq := s.store.PublishedSeq(queue, prio)
	if v, ok := s.stored.Load(topology.ReadyConsumer(queue, prio)); ok {
		seq = max(seq, v.(uint64))
	}
	return seq
}

// levelInfo is what a level consumer's info tells: its count of messages
// (pending plus ack-pending: undelivered, or handed out and not settled,
// which includes put-back ones), the undelivered ones, its delivered
// stream sequence, and its ack floor (every message of the level up to it
// is gone from the work-queue stream).
type levelInfo struct {
	count     uint64
	pending   uint64
	delivered uint64
	ackFloor  uint64
	// missing: the level has no consumer (never used here, or removed
	// while idle); its count is unknown.
	missing bool
}

// maxInfoLookups bounds the consumer infos of one lookup in flight.
const maxInfoLookups = 32

// levelInfos asks the consumers of a queue's levels for their info, in
// parallel, creating consumers as needed.
func (s *Service) levelInfos(ctx context.Context, queue string, levels []int) (map[int]levelInfo, error) {
	out := make([]levelInfo, len(levels))
	errs := make([]error, len(levels))
	one := func(i int) {
		out[i], errs[i] = s.levelInfo(ctx, queue, levels[i])
	}
	if len(levels) == 1 {
		one(0)
	} else {
		sem := make(chan struct{}, maxInfoLookups)
		var wg sync.WaitGroup
		for i := range levels {
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				one(i)
			}()
		}
		wg.Wait()
	}
	m := make(map[int]levelInfo, len(levels))
	for i, p := range levels {
		if errs[i] != nil {
			return nil, errs[i]
		}
		m[p] = out[i]
	}
	return m, nil
}

// levelInfo asks one level's consumer for its info. A consumer this
// process does not hold yet is looked up by name, not created: creating
// one counts the level's messages by walking their subjects, which the
// pull of a level that holds messages does anyway, and a level whose
// consumer is gone (removed while idle) is reported missing and pulled
// (which creates it). A consumer found with other filters (made by an
// earlier version) is updated.
func (s *Service) levelInfo(ctx context.Context, queue string, prio int) (levelInfo, error) {
	name := topology.ReadyConsumer(queue, prio)
	var info *jetstream.ConsumerInfo
	if c, ok := s.consumers.Load(name); ok {
		var err error
		info, err = c.(jetstream.Consumer).Info(ctx)
		if err != nil {
			s.consumers.Delete(name)
			if !errors.Is(err, jetstream.ErrConsumerNotFound) {
				return levelInfo{}, consumerErr(queue, prio, err)
			}
			info = nil
		}
	}
	if info == nil {
		c, err := s.assets.Ready.Consumer(ctx, name)
		switch {
		case errors.Is(err, jetstream.ErrConsumerNotFound):
			return levelInfo{missing: true}, nil
		case err != nil:
			return levelInfo{}, consumerErr(queue, prio, err)
		}
		info = c.CachedInfo()
		if !slices.Equal(info.Config.FilterSubjects, topology.ReadyLevelFilters(queue, prio)) {
			if c, err = s.consumer(ctx, queue, prio); err != nil {
				return levelInfo{}, err
			}
			info = c.CachedInfo()
		} else {
			s.consumers.LoadOrStore(name, c)
		}
	}
	return levelInfo{
		count:     info.NumPending + uint64(info.NumAckPending),
		pending:   info.NumPending,
		delivered: info.Delivered.Stream,
		ackFloor:  info.AckFloor.Stream,
	}, nil
}

func consumerErr(queue string, prio int, err error) error {
	return fmt.Errorf("consumer %s: %w", topology.ReadyConsumer(queue, prio), jobstore.Unavailable(err))
}

// levels lists the levels of a queue that may hold messages a fetch can
// take, ascending, with each registered level's count (pending plus
// ack-pending; 1 for a level whose consumer is missing) and consumer
// info: the registered levels whose count is above zero or whose
// consumer is missing, and those this process published to since it was
// last handed one of their messages, or found stored since (unseen).
func (s *Service) levels(ctx context.Context, queue string) ([]int, map[int]uint64, map[int]levelInfo, error) {
	reg := s.store.Levels(queue)
	if len(reg) == 0 {
		return nil, nil, nil, nil
	}
	infos, err := s.levelInfos(ctx, queue, reg)
	if err != nil {
		return nil, nil, nil, err
	}
	var levels []int
	counts := make(map[int]uint64, len(reg))
	for _, p := range reg {
		in := infos[p]
		counts[p] = in.count
		if in.missing {
			counts[p] = 1 // a guess, to size the pull's waves
		}
		if in.count > 0 || in.missing || s.unseen(queue, p) {
			levels = append(levels, p)
		}
	}
	return levels, counts, infos, nil
}

// afterLevelPull follows a no-wait pull on a level: it notes the sequences
// handed out and, when the pull came back empty on a level this process
// published to since, waits for the message (recheckLevel).
func (s *Service) afterLevelPull(ctx context.Context, cons jetstream.Consumer, queue string, prio int, msgs []jetstream.Msg) []jetstream.Msg {
	name := topology.ReadyConsumer(queue, prio)
	var seen uint64
	if v, ok := s.seen.Load(name); ok && v.(levelSeen).cons == cons {
		seen = v.(levelSeen).seq
	}
	last := seen
	recheck := false
	// A put-back message is redelivered before any other: a pull that
	// gets messages got it, an empty one may have come before the Nak.
	putBack := s.held.takePutBack(name) // levelpull.go
	if len(msgs) == 0 {
		pub := s.knownSeq(queue, prio)
		if pub > seen || putBack {
			recheck = true
			msgs = s.recheckLevel(ctx, cons, queue, prio, pub, putBack)
			if len(msgs) == 0 {
				// Waited for, or delivered already: it is not waited
				// for again.
				last = max(seen, pub)
			}
		}
	}
	for _, m := range msgs {
		if md, err := m.Metadata(); err == nil {
			last = max(last, md.Sequence.Stream)
		}
	}
	if last != seen {
		s.seen.Store(name, levelSeen{cons: cons, seq: last})
	}
	// Forget what this level's earlier pulls handed out and has been
	// settled since: only a pull over several levels counts what is held
	// (pullLevels), and a queue with one level never did, so every job
	// it ever ran stayed in heldReady (issue 20: ~135 bytes per job).
	s.held.count(name, s.cfg.ClaimAckWait) // levelpull.go
	s.track(name, msgs, recheck)           // levelpull.go
	return msgs
}

// recheckLevel pulls one message from a level whose no-wait pull came back
// empty although the level holds a message stored (sequence pub) after the
// last one this process was handed, or this process put one back (Nak) a
// moment ago: with a pull that waits recheckWait at most, unless the
// consumer has delivered past pub already (to another fetch) and nothing
// was put back. While the consumer has not delivered pub and the stream
// still holds it (or a message after it), it tries again, for lagWait in
// all.
func (s *Service) recheckLevel(ctx context.Context, cons jetstream.Consumer, queue string, prio int, pub uint64, putBack bool) []jetstream.Msg {
	deadline := time.Now().Add(lagWait)
	for {
		if !putBack {
			info, err := cons.Info(ctx)
			if err != nil {
				// Removed while idle: the next fetch creates it again.
				s.consumers.Delete(topology.ReadyConsumer(queue, prio))
				return nil
			}
			if info.Delivered.Stream >= pub {
				return nil
			}
		}
		if msgs := pullWaiting(cons); len(msgs) > 0 || putBack || !time.Now().Before(deadline) {
			return msgs
		}
		// Still not delivered: the consumer's replica of the stream trails
		// its leader (a cluster), or the message went away before anyone
		// was handed it. The stream tells which.
		last, _, err := s.store.LastReady(ctx, queue, prio)
		if err != nil || last == 0 {
			return nil
		}
		pub = min(pub, last)
	}
}

// pullWaiting pulls one message from cons, waiting recheckWait at most.
func pullWaiting(cons jetstream.Consumer) []jetstream.Msg {
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

// listLevels reads the infos of a queue's level consumers (reg: its
// registered levels) from the stream's consumer list, a page of up to 256
// consumer infos per request, sorted by name: a queue's consumers share
// the prefix ready_<queue>_, so they come together. One request answers
// for hundreds of levels, about four times cheaper than as many consumer
// infos (measured here: 256 levels, 4.5-5.8 ms against 17-19 ms). The
// page is asked from where the queue's consumers were last found (from,
// 0 the first time), and asked again from earlier when it may have
// started inside them. It returns the infos and the offset to start from
// next time.
func (s *Service) listLevels(ctx context.Context, queue string, reg []int, from int) (map[int]levelInfo, int, error) {
	names := make(map[string]int, len(reg))
	for _, p := range reg {
		names[topology.ReadyConsumer(queue, p)] = p
	}
	prefix := topology.ReadyConsumer(queue, 0)
	prefix = prefix[:strings.LastIndexByte(prefix, '_')+1]
	out := make(map[int]levelInfo, len(reg))
	offset, first, cont := from, -1, false
	for range 8 {
		page, err := s.consumerPage(ctx, offset)
		if err != nil {
			return nil, 0, err
		}
		if len(page.Consumers) == 0 {
			if offset == 0 {
				break
			}
			offset, first, cont = 0, -1, false // the list shrank below the guess
			clear(out)
			continue
		}
		if offset > 0 && !cont && page.Consumers[0].Name >= prefix {
			// The page may start inside the queue's consumers.
			offset = max(0, offset-listPage/2)
			continue
		}
		past := false
		for i, c := range page.Consumers {
			if c.Name >= prefix && first < 0 {
				first = offset + i
			}
			if !strings.HasPrefix(c.Name, prefix) {
				past = past || c.Name > prefix
				continue
			}
			p, ok := names[c.Name]
			if !ok {
				continue
			}
			if !slices.Equal(c.Config.FilterSubjects, topology.ReadyLevelFilters(queue, p)) {
				continue // made by an earlier version: missing, so the pull updates it
			}
			out[p] = levelInfo{
				count:     c.NumPending + c.NumAckPending,
				pending:   c.NumPending,
				delivered: c.Delivered.Stream,
				ackFloor:  c.AckFloor.Stream,
			}
		}
		offset += len(page.Consumers)
		if past || offset >= page.Total {
			break
		}
		cont = true
	}
	for _, p := range reg {
		if _, ok := out[p]; !ok {
			out[p] = levelInfo{missing: true}
		}
	}
	return out, max(0, first-1), nil
}

// listPage is the most consumer infos nats-server puts in one page of a
// consumer list.
const listPage = 256

// consumerPage is one page of $JS.API.CONSUMER.LIST, the fields read.
type consumerPage struct {
	Total     int `json:"total"`
	Consumers []struct {
		Name   string `json:"name"`
		Config struct {
			FilterSubjects []string `json:"filter_subjects"`
		} `json:"config"`
		Delivered struct {
			Stream uint64 `json:"stream_seq"`
		} `json:"delivered"`
		AckFloor struct {
			Stream uint64 `json:"stream_seq"`
		} `json:"ack_floor"`
		NumAckPending uint64 `json:"num_ack_pending"`
		NumPending    uint64 `json:"num_pending"`
	} `json:"consumers"`
	Error *jetstream.APIError `json:"error"`
}

// consumerPage asks for the ready stream's consumer infos from offset on.
func (s *Service) consumerPage(ctx context.Context, offset int) (*consumerPage, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
	}
	m, err := s.nc.RequestWithContext(ctx, "$JS.API.CONSUMER.LIST."+topology.ReadyStream, fmt.Appendf(nil, `{"offset":%d}`, offset))
	if err != nil {
		return nil, fmt.Errorf("list ready consumers: %w", jobstore.Unavailable(err))
	}
	var page consumerPage
	if err := json.Unmarshal(m.Data, &page); err != nil {
		return nil, fmt.Errorf("list ready consumers: %w", err)
	}
	if page.Error != nil {
		return nil, fmt.Errorf("list ready consumers: %w", page.Error)
	}
	return &page, nil
}
