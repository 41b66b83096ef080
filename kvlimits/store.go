package kvlimits

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

	"github.com/jetgate/jetgate/admission/ojs"
	"github.com/jetgate/jetgate/jetstream/jobstore"
	"github.com/jetgate/jetgate/jetstream/topology"
)

// Entry names a limit entry: its scope and its key (a rate limit key or
// a queue name).
type Entry struct {
	Scope string
	Key   string
}

// KeyEntry and QueueEntry name the entry of a job key and of a queue.
func KeyEntry(key string) Entry     { return Entry{Scope: ScopeKey, Key: key} }
func QueueEntry(queue string) Entry { return Entry{Scope: ScopeQueue, Key: queue} }

// Name is the entry's KV key: the scope, a dot, and the escaped key, so
// "tenant:acme" or "a.b" can never inject a subject token or wildcard.
func (e Entry) Name() string { return e.Scope + "." + topology.Token(e.Key) }

// String is the entry's name, for logs and records.
func (e Entry) String() string { return e.Name() }

// ParseEntry reads an entry back from its name.
func ParseEntry(name string) (Entry, bool) {
	scope, tok, ok := strings.Cut(name, ".")
	if !ok || (scope != ScopeKey && scope != ScopeQueue) {
		return Entry{}, false
	}
	key, err := topology.Untoken(tok)
	if err != nil {
		return Entry{}, false
	}
	return Entry{Scope: scope, Key: key}, true
}

// Store reads and changes limit entries. Changes of one entry made by
// this process are gathered and written as one compare-and-swap; the CAS
// on the entry's revision is the fence between processes, so batching
// changes how many writes happen, never who wins.
type Store struct {
	kv jetstream.KeyValue

	mu      sync.Mutex
	entries map[string]*entry
}

// maxCached bounds the entries whose last state is remembered.
const maxCached = 20_000

// New returns a Store over the OJS_LIMITS bucket.
func New(kv jetstream.KeyValue) *Store {
	return &Store{kv: kv, entries: map[string]*entry{}}
}

// entry serialises this process's changes of one limit entry: the first
// change to find it idle writes every change queued meanwhile with it.
type entry struct {
	e Entry

	mu      sync.Mutex
	pending []*change
	busy    bool
	// state and rev are the last state this process read or wrote; a
	// change starts from them and falls back to a read on conflict.
	state *State
	rev   uint64
	// guessed is set once the entry was first assumed not to exist: a
	// first write is then a create, with no read before it (keys are
	// often new), and a lost guess costs the read it saved.
	guessed bool
}

type change struct {
	fn   func(*State) bool
	err  error
	done chan struct{}
}

func (s *Store) entry(e Entry) *entry {
	name := e.Name()
	s.mu.Lock()
	defer s.mu.Unlock()
	en, ok := s.entries[name]
	if ok {
		return en
	}
	if len(s.entries) >= maxCached {
		for k, old := range s.entries {
			old.mu.Lock()
			idle := !old.busy && len(old.pending) == 0
			old.mu.Unlock()
			if idle {
				delete(s.entries, k)
			}
			if len(s.entries) < maxCached/2 {
				break
			}
		}
	}
	en = &entry{e: e}
	s.entries[name] = en
	return en
}

// Update applies fn to the entry's current state and writes the result if
// fn reports a change, all as one compare-and-swap; on a lost race fn runs
// again on the fresh state. A run that changes nothing is trusted only on
// a fresh read, never on the cached state. fn must depend only on the state it is given
// (it may record its outcome in variables it closes over: the last run is
// the one that was written). A missing entry starts as an empty State.
func (s *Store) Update(ctx context.Context, e Entry, fn func(*State) bool) error {
	return s.UpdateQueued(ctx, e, fn, nil)
}

// UpdateQueued is Update, calling queued (if not nil) once the change is
// queued: changes of one entry are applied in the order they were queued
// in this Store, together in one compare-and-swap or in later ones, so a
// change queued after queued was called is applied after this one.
func (s *Store) UpdateQueued(ctx context.Context, e Entry, fn func(*State) bool, queued func()) error {
	en := s.entry(e)
	c := &change{fn: fn, done: make(chan struct{})}
	en.mu.Lock()
	en.pending = append(en.pending, c)
	lead := !en.busy
	en.busy = true
	en.mu.Unlock()
	if queued != nil {
		queued()
	}
	if lead {
		s.run(context.WithoutCancel(ctx), en)
	}
	select {
	case <-c.done:
		return c.err
	case <-ctx.Done():
		// The change may still be written: callers treat this like a
		// lost connection (unknown outcome) and rely on reconciliation.
		return fmt.Errorf("limit %s: %w", e, jobstore.Unavailable(ctx.Err()))
	}
}

// run writes queued changes until none is left.
func (s *Store) run(ctx context.Context, en *entry) {
	for {
		en.mu.Lock()
		batch := en.pending
		en.pending = nil
		if len(batch) == 0 {
			en.busy = false
			en.mu.Unlock()
			return
		}
		en.mu.Unlock()
		err := s.write(ctx, en, batch)
		for _, c := range batch {
			c.err = err
			close(c.done)
		}
	}
}

// maxConflicts bounds the compare-and-swap retries of one write.
const maxConflicts = 64

func (s *Store) write(ctx context.Context, en *entry, batch []*change) error {
	ctx, cancel := context.WithTimeout(ctx, writeTimeout)
	defer cancel()
	for range maxConflicts {
		fresh := false
		if en.state == nil && !en.guessed {
			en.guessed = true
			en.state, en.rev = &State{Key: en.e.Key, Scope: en.e.Scope}, 0
		}
		if en.state == nil {
			st, rev, err := s.read(ctx, en.e)
			if err != nil {
				return err
			}
			en.state, en.rev, fresh = st, rev, true
		}
		next := en.state.Clone()
		next.rev = en.rev
		changed := false
		for _, c := range batch {
			if c.fn(next) {
				changed = true
			}
		}
		if !changed {
			if fresh {
				return nil
			}
			// Nothing to write, decided on the cached state: only a
			// compare-and-swap would have proved it current, so decide
			// again on a fresh read.
			en.state = nil
			continue
		}
		b, err := json.Marshal(next)
		if err != nil {
			return fmt.Errorf("encode limit %s: %w", en.e, err)
		}
		var rev uint64
		if en.rev == 0 {
			rev, err = s.kv.Create(ctx, en.e.Name(), b)
		} else {
			rev, err = s.kv.Update(ctx, en.e.Name(), b, en.rev)
		}
		if err == nil {
			en.state, en.rev = next, rev
			return nil
		}
		en.state = nil
		if !errors.Is(err, jetstream.ErrKeyExists) && !errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
			return fmt.Errorf("write limit %s: %w", en.e, jobstore.Unavailable(err))
		}
	}
	return fmt.Errorf("write limit %s: %w", en.e, ojs.ErrConflict)
}

// Register makes sure a job key's entry exists, with declared merged into
// its policy (Tighten), so the key can be inspected before its first start.
// It writes at most one compare-and-swap: a create when the entry is
// missing, an update only when declared is stricter than the stored
// policy, nothing otherwise. The create expects no entry, so an entry
// another process wrote meanwhile is read and merged into, never replaced.
func (s *Store) Register(ctx context.Context, e Entry, declared ojs.Limits) error {
	return s.Update(ctx, e, func(st *State) bool {
		tightened := st.Tighten(declared)
		return tightened || st.rev == 0
	})
}

// writeTimeout bounds one write of an entry, retries included.
const writeTimeout = 10 * time.Second

// read returns an entry's state and revision; a missing entry is an empty
// State at revision 0.
func (s *Store) read(ctx context.Context, e Entry) (*State, uint64, error) {
	kve, err := s.kv.Get(ctx, e.Name())
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound), errors.Is(err, jetstream.ErrKeyDeleted):
		rev := uint64(0)
		if kve != nil {
			rev = kve.Revision()
		}
		return &State{Key: e.Key, Scope: e.Scope}, rev, nil
	case err != nil:
		return nil, 0, fmt.Errorf("read limit %s: %w", e, jobstore.Unavailable(err))
	}
	st := &State{}
	if err := json.Unmarshal(kve.Value(), st); err != nil {
		return nil, 0, fmt.Errorf("decode limit %s: %w", e, err)
	}
	st.Key, st.Scope = e.Key, e.Scope
	return st, kve.Revision(), nil
}

// Get reads an entry from JetStream (never from the cache). A missing
// entry is a NotFoundError.
func (s *Store) Get(ctx context.Context, e Entry) (*State, error) {
	st, rev, err := s.read(ctx, e)
	if err != nil {
		return nil, err
	}
	if rev == 0 {
		return nil, &ojs.NotFoundError{Resource: "rate limit", ID: e.Key}
	}
	return st, nil
}

// Cached returns this process's last known state of an entry, or nil. It
// is a hint, never a decision.
func (s *Store) Cached(e Entry) *State {
	s.mu.Lock()
	en, ok := s.entries[e.Name()]
	s.mu.Unlock()
	if !ok {
		return nil
	}
	en.mu.Lock()
	defer en.mu.Unlock()
	if en.busy || en.state == nil {
		return nil
	}
	return en.state.Clone()
}

// List returns the entries of a scope ("" for all), sorted by name.
func (s *Store) List(ctx context.Context, scope string) ([]Entry, error) {
	filter := ">"
	if scope != "" {
		filter = scope + ".>"
	}
	lister, err := s.kv.ListKeysFiltered(ctx, filter)
	if err != nil {
		return nil, fmt.Errorf("list limits: %w", jobstore.Unavailable(err))
	}
	var names []string
	for k := range lister.Keys() {
		names = append(names, k)
	}
	slices.Sort(names)
	out := make([]Entry, 0, len(names))
	for _, n := range names {
		if e, ok := ParseEntry(n); ok {
			out = append(out, e)
		}
	}
	return out, nil
}

// Snapshot returns this process's last known state of every entry it has
// used: a view for gauges, never a decision.
func (s *Store) Snapshot() []*State {
	s.mu.Lock()
	ens := make([]*entry, 0, len(s.entries))
	for _, en := range s.entries {
		ens = append(ens, en)
	}
	s.mu.Unlock()
	out := make([]*State, 0, len(ens))
	for _, en := range ens {
		en.mu.Lock()
		if en.state != nil {
			out = append(out, en.state.Clone())
		}
		en.mu.Unlock()
	}
	return out
}
