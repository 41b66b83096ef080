package jobstore

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetgate/jetgate/jetstream/topology"
)

// ReadyPresent reports which of subjects (exact ready subjects,
// topology.ReadySubject) hold a message in the ready stream: for the
// count keeper, which asks it of the ready messages that claims of a dead
// process still hold (admission/heldcheck.go). A ready message acked or
// deleted is gone at once (work-queue retention), so an absent subject
// means the message is settled.
//
// On one server it is one batched direct get per MaxLastPerSubject
// subjects ({"multi_last": [...]}, ADR-31); an answer cut short by the
// server's byte limit (ready messages may carry their job) is asked again
// for the subjects it did not reach. Where direct gets are off
// (replicas, topology.Ensure) it is one stream info per subject, filtered
// on it (no body), through the leader, 16 at a time.
func (s *Store) ReadyPresent(ctx context.Context, subjects []string) (map[string]bool, error) {
	out := make(map[string]bool, len(subjects))
	if len(subjects) == 0 {
		return out, nil
	}
	cfg := s.assets.Ready.CachedInfo().Config
	if !cfg.AllowDirect || cfg.Replicas > 1 {
		return out, s.readyPresentLeader(ctx, subjects, out)
	}
	todo := subjects
	for len(todo) > 0 {
		n := min(len(todo), MaxLastPerSubject)
		chunk := todo[:n]
		todo = todo[n:]
		body, err := json.Marshal(struct {
			MultiLast []string `json:"multi_last"`
		}{chunk})
		if err != nil {
			return nil, err
		}
		msgs, left, err := s.directGetUpTo(ctx, topology.ReadyStream, body, n)
		if err != nil {
			return nil, fmt.Errorf("find held ready messages: %w", Unavailable(err))
		}
		for _, m := range msgs {
			out[m.Subject] = true
		}
		if left == 0 {
			continue
		}
		// Cut short: the subjects not answered are asked again.
		var again []string
		for _, subj := range chunk {
			if !out[subj] {
				again = append(again, subj)
			}
		}
		if len(msgs) == 0 {
			return nil, fmt.Errorf("find held ready messages: an answer of none with %d left", left)
		}
		todo = append(again, todo...)
	}
	return out, nil
}

// readyPresentLeader is ReadyPresent through the stream leader.
func (s *Store) readyPresentLeader(ctx context.Context, subjects []string, out map[string]bool) error {
	var (
		mu    sync.Mutex
		first error
		wg    sync.WaitGroup
		sem   = make(chan struct{}, 16)
	)
	for _, subj := range subjects {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			info, err := s.assets.Ready.Info(ctx, jetstream.WithSubjectFilter(subj))
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				first = cmp.Or(first, fmt.Errorf("find held ready message %s: %w", subj, Unavailable(err)))
				return
			}
			if info.State.Subjects[subj] > 0 {
				out[subj] = true
			}
		}()
	}
	wg.Wait()
	return first
}

// ReadyHead is one ready message as ScanReadyLevel reads it: its
// sequence, when it was stored, its job and token, and whether it carries
// its job (a seed, seed.go) rather than only naming it.
type ReadyHead struct {
	Seq     uint64
	Subject string
	Time    time.Time
	Ref     MsgRef
	Seed    bool
}

// ScanReadyLevel reads the ready messages of one priority level of a
// queue stored at or after sequence from, at most max of them, and calls
// fn with each until fn returns false: for the count keeper, which looks
// among them for messages whose job record never came
// (admission/orphans.go). It reads as ScanReady does (batched direct gets
// on one server, one message get each through the leader otherwise) but
// decodes no body: a message with one is a seed.
func (s *Store) ScanReadyLevel(ctx context.Context, queue string, prio int, from uint64, max int,
	fn func(ReadyHead) bool) (ScanPos, error) {
	filter := topology.ReadyLevelFilters(queue, prio)[0] // not the layout without ids of early versions
	return s.scan(ctx, s.assets.Ready, topology.ReadyStream, filter, from, max, func(m *jetstream.RawStreamMsg) bool {
		ref, ok := Ref(m.Header)
		if !ok {
			return true
		}
		return fn(ReadyHead{Seq: m.Sequence, Subject: m.Subject, Time: m.Time, Ref: ref, Seed: len(m.Data) > 0})
	})
}
