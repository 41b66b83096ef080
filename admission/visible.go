package admission

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetgate/jetgate/jetstream/topology"
)

// Jobs made ready by other processes (issue 31 item 7).
//
// A fetch that starts after an enqueue was answered must find that job,
// whichever process enqueued it, if the job is still available: an empty
// answer promises that no job was (ojs-worker-protocol.md 6.5). A fetch
// is answered from what this process knows, and three things it knows
// could hide a job another process stored:
//
//   - The levels of a queue registered by another process reach this one
//     through the watch of OJS_QUEUES, a moment later. A pull that found
//     nothing reads the queue's record (learnLevels, fetch.go), which on
//     a cluster is the stream leader's answer.
//   - A level consumer's count of pending messages trails the stream:
//     nats-server updates it asynchronously after acknowledging a
//     publish, and on a cluster the consumer's leader counts from its own
//     replica of the stream, which applies a message after the stream's
//     leader acknowledged it (measured: up to 70 ms on a loaded 2-core
//     box). A no-wait pull (or a consumer info) of the level then says
//     empty. So a pull that found nothing asks the stream itself for the
//     last ready message stored at the queue's levels (storedLevels: one
//     read for the whole queue, answered from the subjects stored there,
//     and one per level only when the queue holds messages). A level that
//     holds one stored after the last message this process was handed
//     from it is pulled again, and its empty answer becomes pulls that
//     wait until the consumer has delivered that message (levels.go,
//     recheckLevel).
//   - Messages another live process pulled ahead of its own fetches and
//     holds unclaimed (prefetch.go), for up to aheadFor. Their jobs are
//     available: to a worker and to the spec, a job waiting in a process's
//     memory is no different from one waiting in the stream, and a fetch
//     of another worker must not miss it. So while a process may hold
//     messages of a queue ahead, it listens on the queue's give-back
//     subject (ojs.ahead.<queue>, core NATS); a fetch that still found
//     nothing while the stream holds messages of the queue (handed out
//     and not settled: being claimed, holding a deferred lease, or pulled
//     ahead) asks there. Every process listening puts back (Nak, the
//     server's answer awaited) what it holds ahead of the queue, lets a
//     pull ahead under way land and put its messages back too, stops
//     pulling ahead until its next pull gets all it asks for, stops
//     listening and answers; the fetch then pulls again. A process
//     listens from before the pull whose messages it may keep (so a
//     message it took is never held unheard) until it holds none and
//     pulls none ahead. No process listening: the server answers "no
//     responders" at once, and the fetch answers empty.
//
// The cost falls on fetches that would answer empty, which wait
// Config.FetchWait (10 ms) afterwards anyway: one read of the stream for
// an idle queue; with messages handed out, a read per level, a consumer
// info when one is newer than what this process was handed, and one
// give-back request. Fetches that find jobs pay nothing.
//
// What stays out: a job being claimed by another process's fetch at that
// moment is not available (its claim decides), and a job made available
// while this fetch was already under way may or may not be in its
// answer, as with any concurrent fetch.

// maxGiveBacks bounds the give-back requests of one fetch: each answer
// came from a process that put back what it held, so a second request is
// needed only when several processes held messages of the queue, or one
// answered before the pull it had under way landed.
const maxGiveBacks = 3

// giveBackWait bounds the wait for an answer to a give-back request. A
// process answers after putting its messages back (a round trip); a
// request it received while it stopped listening is never answered, and
// costs the fetch this wait.
const giveBackWait = 250 * time.Millisecond

// pullUnseen takes up to want ready messages of a queue whose levels, as
// this process knows them, gave nothing: it asks the stream what is
// stored at the queue's levels, pulls the levels holding messages stored
// after those this process was handed, and asks the processes holding
// messages of the queue ahead to give them back.
func (s *Service) pullUnseen(ctx context.Context, queue string, want int) ([]jetstream.Msg, error) {
	stored, err := s.storedLevels(ctx, queue)
	if err != nil {
		// The stream did not answer: the fetch answers from what this
		// process knew.
		s.log.Warn("fetch could not read the ready stream", "queue", queue, "error", err)
		return nil, nil
	}
	if len(stored) == 0 {
		return nil, nil
	}
	unseen := false
	for p, seq := range stored {
		if seq > s.seenSeq(queue, p) {
			s.noteStored(queue, p, seq)
			unseen = true
		}
	}
	if unseen {
		if out, err := s.pullKnown(ctx, queue, want); len(out) > 0 || err != nil {
			return out, err
		}
	}
	// Every message stored at the queue's levels was handed out and is
	// not settled yet: some may be held ahead by other processes.
	for range maxGiveBacks {
		if !s.askGiveBack(ctx, queue) {
			return nil, nil
		}
		if out, err := s.pullKnown(ctx, queue, want); len(out) > 0 || err != nil {
			return out, err
		}
	}
	return nil, nil
}

// storedLevels returns, for each registered level of a queue that holds a
// ready message in the stream, the sequence of its last one. A queue
// holding none costs one read; a queue with one level too.
func (s *Service) storedLevels(ctx context.Context, queue string) (map[int]uint64, error) {
	reg := s.store.Levels(queue)
	if len(reg) == 0 {
		return nil, nil
	}
	last, err := s.store.LastReadySeq(ctx, queue, -1)
	if err != nil || last == 0 {
		return nil, err
	}
	if len(reg) == 1 {
		return map[int]uint64{reg[0]: last}, nil
	}
	seqs := make([]uint64, len(reg))
	errs := make([]error, len(reg))
	sem := make(chan struct{}, maxInfoLookups)
	var wg sync.WaitGroup
	for i, p := range reg {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			seqs[i], errs[i] = s.store.LastReadySeq(ctx, queue, p)
		}()
	}
	wg.Wait()
	out := map[int]uint64{}
	for i, p := range reg {
		if errs[i] != nil {
			return nil, errs[i]
		}
		if seqs[i] > 0 {
			out[p] = seqs[i]
		}
	}
	return out, nil
}

// noteStored notes that a level's last stored message is at seq (unseen,
// levels.go).
func (s *Service) noteStored(queue string, prio int, seq uint64) {
	name := topology.ReadyConsumer(queue, prio)
	for {
		v, loaded := s.stored.LoadOrStore(name, seq)
		if !loaded || v.(uint64) >= seq || s.stored.CompareAndSwap(name, v, seq) {
			return
		}
	}
}

// askGiveBack asks the processes holding messages of queue pulled ahead
// to put them back, and reports whether one answered (it put back what it
// held before answering).
func (s *Service) askGiveBack(ctx context.Context, queue string) bool {
	ctx, cancel := context.WithTimeout(ctx, giveBackWait)
	defer cancel()
	m, err := s.nc.RequestWithContext(ctx, topology.AheadSubject(queue), nil)
	if err != nil {
		return false // no process listens (or none answered in time)
	}
	if n, _ := strconv.Atoi(string(m.Data)); n > 0 && s.debugging() {
		s.log.Debug("messages pulled ahead given back", "queue", queue, "count", n)
	}
	return true
}
