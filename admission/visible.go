package admission

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/jetgate/jetgate/jetstream/topology"
)

// Jobs made ready by other processes (issue 31 item 7).
//
// A fetch that starts after an enqueue was answered must find that job,
// whichever process enqueued it, while the job is available: an empty
// answer says no job was (ojs-worker-protocol.md 6.5). A fetch is answered
// from what this process knows, and three things it knows could hide a
// job another process stored:
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
//     empty.
//   - Messages another live process pulled ahead of its own fetches and
//     holds unclaimed (prefetch.go), for up to aheadFor. Their jobs are
//     available: to a worker and to the spec, a job waiting in a process's
//     memory is no different from one waiting in the stream, and a fetch
//     of another worker must not miss it.
//
// So a fetch that would answer empty looks again first (lookAgain): it
// asks the stream itself for the last ready message stored at the queue's
// levels (storedLevels: one read for the whole queue, answered from the
// subjects stored there; when a queue of several levels holds messages,
// a listing of the levels holding some and a read for each), and, at the
// same time, the processes holding messages of the queue ahead to give
// them back. A level whose last stored message came after the last one
// this process was handed from it counts as holding one (unseen,
// levels.go); the fetch pulls again, and an empty answer of that level
// becomes pulls that wait until its consumer has delivered the message
// (recheckLevel). While a process may hold messages of a queue ahead, it
// listens on the queue's give-back subject (ojs.ahead.<queue>, core
// NATS), from before the pull whose messages it may keep (so a message it
// took is never held unheard) until it holds none and pulls none ahead.
// Asked, it puts back (Nak, the server's answer awaited) what it holds
// ahead, lets a pull ahead under way land and put its messages back too,
// stops pulling ahead until a pull gets all it asks for again, stops
// listening, and answers; the fetch then pulls again. No process
// listening: the server answers "no responders" at once.
//
// Only a fetch about to answer empty looks: one that found nothing waits
// Config.FetchWait (10 ms) for a job this process makes ready first
// (fetch.go), and looks once that wait is over. The look runs outside the
// queue's puller, so the fetches it serves are not held up, and
// concurrent fetches share one: a look that started after a fetch
// started answers for it. Its cost: one read of the stream and one
// give-back request at once; with messages stored in a queue of several
// levels, a listing of its stored subjects and a read per level holding
// some; a consumer info when a stored message is newer than what this
// process was handed. Fetches that find jobs pay nothing.
//
// What stays out: a job being claimed by another process's fetch at that
// moment is not available (its claim decides); a fetch that finds some
// jobs may get fewer than are available when others are held ahead
// elsewhere or not counted yet (looking on every short answer would cost
// every fetch of a queue kept nearly empty); and a job made available
// while this fetch was under way may or may not be in its answer, as with
// any concurrent fetch.

// maxGiveBacks bounds the give-back requests of one look: every process
// listening is asked at once and answers once it put back what it held,
// so the look asks again until none listens, to hear the slower ones.
const maxGiveBacks = 3

// giveBackWait bounds the wait for an answer to a give-back request. A
// process answers once its messages are back (a round trip, or the end of
// a pull ahead it had under way); one that stops listening drains its
// subscription, so requests that reached it are answered too. The bound
// only matters for a process stalled or dying meanwhile.
const giveBackWait = 250 * time.Millisecond

// emptyLooks holds the last look of each queue (lookAgain).
type emptyLooks struct {
	mu    sync.Mutex
	looks map[string]*emptyLook
}

// emptyLook is one look at the stream and the other processes for a queue
// that a fetch found empty: it started at started, and more says whether
// the fetch should pull again (done is closed once it is set).
type emptyLook struct {
	started time.Time
	done    chan struct{}
	more    bool
}

// lookAgain is called by a fetch that started at since and found queue
// empty: it reports whether the stream holds messages of the queue this
// process was not handed, or a process that held some ahead gave them
// back, so that the fetch pulls again. Fetches share a look: one that
// started after since saw every job stored before the fetch started, so
// such a look under way, or done, answers for it.
func (s *Service) lookAgain(ctx context.Context, queue string, since time.Time) bool {
	s.looks.mu.Lock()
	l := s.looks.looks[queue]
	if l == nil || l.started.Before(since) {
		l = &emptyLook{started: time.Now(), done: make(chan struct{})}
		if s.looks.looks == nil {
			s.looks.looks = map[string]*emptyLook{}
		}
		s.looks.looks[queue] = l
		s.looks.mu.Unlock()
		// Not cancelled with this fetch: others may wait for it. Every
		// call in it has a timeout.
		l.more = s.look(context.WithoutCancel(ctx), queue)
		close(l.done)
		return l.more
	}
	s.looks.mu.Unlock()
	select {
	case <-l.done:
		return l.more
	case <-ctx.Done():
		return false
	}
}

// look asks the stream what it holds of queue, and the processes holding
// its messages ahead to give them back, at once. It notes the levels
// holding messages stored after the last one this process was handed
// (unseen, levels.go), and reports whether there are any, or a process
// gave back what it held.
func (s *Service) look(ctx context.Context, queue string) bool {
	p := s.puller(queue)
	if !p.beginLook() {
		return true // pulled ahead here since: not empty after all
	}
	defer p.endLook()
	var gave bool
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		// Each answer came from a process that put back what it held;
		// one still listening may not have finished when the first
		// answered, so ask until none listens.
		for range maxGiveBacks {
			if !s.askGiveBack(ctx, queue) {
				return
			}
			gave = true
		}
	}()
	stored, err := s.storedLevels(ctx, queue)
	wg.Wait()
	if err != nil {
		// The fetch answers from what this process knew.
		s.log.Warn("fetch could not read the ready stream", "queue", queue, "error", err)
		return gave
	}
	unseen := false
	for p, seq := range stored {
		if seq > s.seenSeq(queue, p) {
			s.noteStored(queue, p, seq)
			unseen = true
		}
	}
	return unseen || gave
}

// storedLevels returns, for each level of a queue that holds a ready
// message in the stream, the sequence of its last one. A queue holding
// none costs one read, as does a queue whose last message is at its only
// registered level; otherwise the levels holding messages are listed
// (jobstore.StoredLevels) and each is read.
func (s *Service) storedLevels(ctx context.Context, queue string) (map[int]uint64, error) {
	reg := s.store.Levels(queue)
	if len(reg) == 0 {
		return nil, nil
	}
	last, level, err := s.store.LastReady(ctx, queue, -1)
	if err != nil || last == 0 {
		return nil, err
	}
	if len(reg) == 1 && reg[0] == level {
		return map[int]uint64{level: last}, nil
	}
	levels, err := s.store.StoredLevels(ctx, queue)
	if err != nil {
		return nil, err
	}
	seqs := make([]uint64, len(levels))
	errs := make([]error, len(levels))
	sem := make(chan struct{}, maxInfoLookups)
	var wg sync.WaitGroup
	for i, p := range levels {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			seqs[i], _, errs[i] = s.store.LastReady(ctx, queue, p)
		}()
	}
	wg.Wait()
	out := map[int]uint64{level: last}
	for i, p := range levels {
		if errs[i] != nil {
			return nil, errs[i]
		}
		if seqs[i] > 0 {
			out[p] = max(out[p], seqs[i])
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
