package admission

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/jetgate/jetgate/jetstream/jobstore"
	"github.com/jetgate/jetgate/jetstream/topology"
)

// orphanCheck is the count keeper's watch over the ready messages whose
// job record never came (issue 31 item 2).
//
// A transition publishes its ready message first and writes the record
// right after (a slow write must not lose the job): an enqueue into a
// bounded queue (its job keeps a record from the start), a batch that is
// not all seeds, a retry or a scheduled job coming due. A process that
// dies between the two leaves a ready message that no record accounts
// for: the fetch path puts it back for orphanWindow before it drops it,
// and it stays in the ready stream for good while nobody fetches its
// level. Counted available, it made `available` too high.
//
// So the keeper compares, per priority level of each known queue, the
// ready stream's count of the level's messages (its consumer's info) with
// what the records account for (the jobs available with a record, less
// those parked, plus the messages counted held and the orphans already
// known: tally.accounted). Seeds (jobs stored as their ready message
// alone) have no record, so an excess is either seeds or orphans. A level
// is scanned when its excess stays (two looks, againAfter apart), at the
// first look after a crash is suspected (this keeper is new: the last
// one may have died; a holder sentinel went stale: heldCheck), or when
// its consumer is gone (nobody fetched it lately: its scan is its count).
// A scan reads the level's ready messages (jobstore.ScanReadyLevel:
// batched direct gets, no consumer, no body decoded) up to scanMax of
// them, and takes as an orphan every message older than minAge that is
// not a seed and that no record accounts for (tally.accounts: not the
// job's available token at that level, nor a claim's held message), once
// the keeper has read every record written before the scan. A level that
// held messages too young to judge is scanned again when they are old
// enough. Orphans count orphan_pNNN, which readers take away from the
// level's count, each message once (a subject may hold several: the
// attempts of an enqueue retried after answers that never came; a level
// with fewer messages than accounted for while orphans are known is
// scanned again, since one of those gone leaves its subject present).
// They are not deleted (a write slower than minAge must
// not lose its job; the fetch path's rule stays): one whose record comes
// after all is no orphan from then on, and one no longer in the ready
// stream (looked up by subject, jobstore.ReadyPresent, every second and
// before each answer, while any is known) is forgotten.
//
// What it costs, nothing per job: one stream info of the ready stream a
// second; while it holds more messages than the records account for in
// all (seeds waiting, or orphans), one consumer info per level of each
// known queue every checkEvery; a scan of a level at most every
// scanEvery, and at most one scanCost-th of the time (a level that took
// 0.9 s to read, 50 000 messages on 2 cores, waits 45 s), unless a crash
// is suspected; each scan reads the whole level (a bounded queue's is at
// most its depth; seeds are read with their bodies), never more than
// scanMax messages (orphans past them are missed), and not again while
// it holds the same messages (a backlog waiting, nothing appended to the
// ready stream) and no crash is suspected, but for once every
// orphanRescan; one lookup by subject
// per orphan known, every second and before each answer.
//
// The numbers it gives: an orphan stops counting about minAge + 1 s after
// it was published (4 s measured), or once the new keeper has read the
// records when the keeper's process died; that is, within 10 s of the
// crash, except in a level whose scan takes long (over about 60 ms: some
// 3 000 messages) and when the process that died was neither the keeper
// nor held ready messages: there the orphan is found by the next scan,
// scanCost times the last scan's duration later at most.
type orphanCheck struct {
	s *Service
	// minAge is how old an unaccounted message must be to be taken for
	// an orphan (its record write had that long to land).
	minAge time.Duration
	// checkEvery, againAfter, scanEvery, scanCost, scanMax: see
	// orphanCheck.
	checkEvery, againAfter, scanEvery, rescan time.Duration
	scanCost, scanMax                         int

	// levels are the known levels' states, by queue token and priority;
	// read and written by watch only (the keeper's loop).
	levels map[levelKey]*orphanLevel
	// scans counts the levels read, settled those of them that left no
	// message too young to judge (for tests).
	scans, settled atomic.Int64
	// suspected is when a crash was last suspected.
	suspected time.Time
	wasHeld   bool
}

// orphanLevel is what the check knows of one level.
type orphanLevel struct {
	nextCheck, nextScan time.Time
	// excess is set while the last look found more ready messages than
	// the records account for.
	excess bool
	// scanned is when the level was last scanned; sig is its consumer's
	// info at that look, and settled that the scan left no message too
	// young to judge.
	scanned time.Time
	sig     levelSig
	settled bool
}

// levelSig tells whether a level may hold other messages than it did.
type levelSig struct {
	info    levelInfo
	lastSeq uint64
}

const (
	orphanMinAge     = 3 * time.Second
	orphanCheckEvery = 2 * time.Second
	orphanScanEvery  = 3 * time.Second
	orphanScanCost   = 50
	orphanScanMax    = 50_000
	// orphanRescan is how long a level that holds the same messages as at
	// its last scan goes without another (see queue).
	orphanRescan = time.Minute
)

func newOrphanCheck(s *Service) *orphanCheck {
	return &orphanCheck{s: s, minAge: orphanMinAge, checkEvery: orphanCheckEvery, againAfter: time.Second,
		scanEvery: orphanScanEvery, rescan: orphanRescan, scanCost: orphanScanCost, scanMax: orphanScanMax,
		levels: map[levelKey]*orphanLevel{}, suspected: time.Now()}
}

// watch runs the check once; the keeper calls it every second. suspect
// says a process was seen dying holding ready messages (heldCheck).
func (c *orphanCheck) watch(ctx context.Context, tl *tally, suspect bool) error {
	now := time.Now()
	if suspect && !c.wasHeld {
		c.suspected = now
	}
	c.wasHeld = suspect
	if err := c.present(ctx, tl); err != nil {
		return err
	}
	st, err := c.s.assets.Ready.Info(ctx)
	if err != nil {
		return jobstore.Unavailable(err)
	}
	if int64(st.State.Msgs) <= tl.accountedAll(now) {
		// Every ready message is accounted for: no orphan, and no
		// excess anywhere (nor a seed).
		for _, l := range c.levels {
			l.excess = false
		}
		return nil
	}
	known := map[string]bool{}
	for _, q := range c.s.queues.list() {
		known[topology.Token(q.Name)] = true
		if err := c.queue(ctx, tl, q.Name, st.State.LastSeq, now); err != nil {
			return err
		}
	}
	for k := range c.levels {
		if !known[k.queue] {
			delete(c.levels, k) // a queue removed
		}
	}
	return nil
}

// queue looks at the levels of one queue whose turn it is, and scans
// those whose excess stays.
func (c *orphanCheck) queue(ctx context.Context, tl *tally, name string, lastSeq uint64, now time.Time) error {
	tok := topology.Token(name)
	var due []int
	for _, p := range c.s.store.Levels(name) {
		l := c.level(tok, p)
		if now.Before(l.nextCheck) {
			continue
		}
		due = append(due, p)
	}
	if len(due) == 0 {
		return nil
	}
	infos, err := c.s.levelInfos(ctx, name, due)
	if err != nil {
		return err
	}
	acc := tl.accounted(tok, now)
	for _, p := range due {
		l := c.level(tok, p)
		l.nextCheck = now.Add(c.checkEvery)
		in := infos[p]
		// Fewer messages than accounted for with orphans known: one of
		// several orphans on a subject is gone, which only a scan sees.
		stale := !in.missing && int64(in.count) < acc[p] && tl.orphansAt(tok, int32(p)) > 0
		if !in.missing && int64(in.count) <= acc[p] && !stale {
			l.excess = false
			continue
		}
		// The excess must stay for two looks, unless a crash is
		// suspected since the last scan. A level whose consumer is gone
		// (nobody fetched it for a while) is not counted: its scan is its
		// count, as often as an excess that stays.
		crash := c.suspected.After(l.scanned)
		stayed := l.excess || in.missing
		l.excess = true
		if !stayed && !crash || now.Before(l.nextScan) && !crash {
			if !stayed {
				l.nextCheck = now.Add(c.againAfter) // the second look
			}
			if l.nextScan.After(now) && l.nextScan.Before(l.nextCheck) {
				l.nextCheck = l.nextScan
			}
			continue
		}
		// A level that holds the same messages as at its last scan, which
		// left none too young to judge, holds no orphan that scan did not
		// find: its seeds are waiting, and reading them again every few
		// seconds would cost an idle backlog (a paused queue, no workers)
		// a steady stream of reads. The same messages: nothing was
		// appended to the ready stream since (its last sequence), and the
		// level's consumer counts the same (a removal moves its count or
		// its floors). It is read again after rescan all the same.
		sig := levelSig{info: in, lastSeq: lastSeq}
		if !crash && !in.missing && l.settled && sig == l.sig && now.Before(l.scanned.Add(c.rescan)) {
			continue
		}
		l.sig = sig
		if err := c.scan(ctx, tl, name, p, l, now); err != nil {
			return err
		}
	}
	return nil
}

func (c *orphanCheck) level(tok string, p int) *orphanLevel {
	k := levelKey{tok, int32(p)}
	l := c.levels[k]
	if l == nil {
		l = &orphanLevel{}
		c.levels[k] = l
	}
	return l
}

// scan reads the ready messages of one level and notes its orphans in tl.
func (c *orphanCheck) scan(ctx context.Context, tl *tally, name string, prio int, l *orphanLevel, now time.Time) error {
	// Every record written before the scan is read first, so that a
	// message whose record landed is not taken for an orphan.
	st, err := c.s.js.Stream(ctx, topology.KVStream(topology.JobsBucket))
	if err != nil {
		return jobstore.Unavailable(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	err = tl.waitApplied(wctx, st.CachedInfo().State.LastSeq)
	cancel()
	if err != nil {
		return fmt.Errorf("records not read up to the scan: %w", err)
	}
	c.scans.Add(1)
	tok := topology.Token(name)
	found := map[uint64]orphanMsg{}
	began := time.Now()
	var young time.Time // the oldest message too young to be judged
	pos, err := c.s.store.ScanReadyLevel(ctx, name, prio, 1, c.scanMax, func(h jobstore.ReadyHead) bool {
		if h.Seed {
			return true
		}
		o := orphanMsg{queue: tok, prio: int32(prio), id: h.Ref.JobID, token: h.Ref.Token, subject: h.Subject}
		if !tl.unaccounted(o, now) {
			return true
		}
		if now.Sub(h.Time) < c.minAge {
			if young.IsZero() || h.Time.Before(young) {
				young = h.Time
			}
			return true
		}
		found[h.Seq] = o
		return true
	})
	if err != nil {
		return err
	}
	if !pos.Done {
		c.s.log.Debug("count keeper: orphan scan stopped at its bound", "queue", name, "priority", prio,
			"read", pos.Read)
	}
	tl.setOrphans(tok, int32(prio), found)
	l.scanned = now
	cost := now.Add(time.Duration(c.scanCost) * time.Since(began))
	l.nextScan = later(now.Add(c.scanEvery), cost)
	l.excess = !young.IsZero()
	l.settled = pos.Done && young.IsZero()
	if l.settled {
		c.settled.Add(1)
	}
	if l.excess {
		// Messages too young to judge: the level is scanned again once
		// they are old enough (or the cost allows).
		l.nextScan = later(young.Add(c.minAge), cost)
	}
	if l.nextScan.Before(l.nextCheck) {
		l.nextCheck = l.nextScan
	}
	return nil
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// present looks up the orphans known and forgets those gone. Safe to call
// at once from several goroutines (the keeper's tick, answers).
func (c *orphanCheck) present(ctx context.Context, tl *tally) error {
	asked := tl.orphanSubjects()
	if len(asked) == 0 {
		return nil
	}
	found, err := c.s.store.ReadyPresent(ctx, asked)
	if err != nil {
		return err
	}
	tl.orphansGone(asked, found)
	return nil
}
