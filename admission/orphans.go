package admission

import (
	"context"
	"fmt"
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
// alone) have no record, so an excess is either seeds or orphans. Where
// the excess stays (two looks, checkEvery apart; at once after a crash is
// suspected: a new keeper, a stale holder sentinel), the keeper reads the
// level's ready messages (jobstore.ScanReadyLevel: batched direct gets, no
// consumer, bodies not decoded) up to scanMax of them, and takes as an
// orphan every message older than minAge that is not a seed and that no
// record accounts for (tally.accounts: not the job's available token at
// that level, nor a claim's held message). Orphans count orphan_pNNN,
// which readers take away from the level's count. They are not deleted (a
// write slower than minAge must not lose its job; the fetch path's rule
// stays): one whose record comes after all is no orphan from then on, and
// one no longer in the ready stream (looked up by subject,
// jobstore.ReadyPresent, every second and before each answer, while any
// is known) is forgotten.
//
// What it costs: one consumer info per level of each known queue every
// checkEvery while the ready stream holds more messages than the records
// account for in all (one stream info a second says whether it does);
// nothing per job. A scan reads the whole level (bounded queues: at most
// their depth; seeds with their bodies) and is made at most every
// scanEvery per queue, every seedEvery when the last one met seeds and no
// crash is suspected since, and never reads more than scanMax messages
// (a level holding more has its orphans past them missed).
//
// The numbers it gives: an orphan stops counting available at most
// minAge + checkEvery + a second after its process died, or after the
// new keeper has read the records when the keeper's process died (under
// 10 s); in a level that holds seeds, the crash of a process that held no
// ready message and was not the keeper is caught by the next scan, at
// most seedEvery later.
type orphanCheck struct {
	s *Service
	// minAge is how old an unaccounted message must be to be taken for
	// an orphan (its record write had that long to land).
	minAge time.Duration
	// checkEvery, scanEvery, scanCost, scanMax: see orphanCheck.
	checkEvery, scanEvery time.Duration
	scanCost, scanMax     int

	// levels are the known levels' states, by queue token and priority;
	// read and written by watch only (the keeper's loop).
	levels map[levelKey]*orphanLevel
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
	// scanned is when the level was last scanned.
	scanned time.Time
}

const (
	orphanMinAge     = 3 * time.Second
	orphanCheckEvery = 2 * time.Second
	orphanScanEvery  = 5 * time.Second
	orphanScanCost   = 50
	orphanScanMax    = 50_000
)

func newOrphanCheck(s *Service) *orphanCheck {
	return &orphanCheck{s: s, minAge: orphanMinAge, checkEvery: orphanCheckEvery, scanEvery: orphanScanEvery,
		scanCost: orphanScanCost, scanMax: orphanScanMax, levels: map[levelKey]*orphanLevel{},
		suspected: time.Now()}
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
	for _, q := range c.s.queues.list() {
		if err := c.queue(ctx, tl, q.Name, now); err != nil {
			return err
		}
	}
	return nil
}

// queue looks at the levels of one queue whose turn it is, and scans
// those whose excess stays.
func (c *orphanCheck) queue(ctx context.Context, tl *tally, name string, now time.Time) error {
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
		if in.missing || int64(in.count) <= acc[p] {
			l.excess = false
			continue
		}
		// The excess must stay for two looks, unless a crash is
		// suspected since the last scan.
		crash := c.suspected.After(l.scanned)
		stayed := l.excess
		l.excess = true
		if !stayed && !crash || now.Before(l.nextScan) && !crash {
			continue
		}
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
		return err
	}
	if err := tl.waitApplied(ctx, st.CachedInfo().State.LastSeq); err != nil {
		return err
	}
	tok := topology.Token(name)
	found := map[string]orphanMsg{}
	began := time.Now()
	var young time.Time // the oldest message too young to be judged
	pos, err := c.s.store.ScanReadyLevel(ctx, name, prio, 1, c.scanMax, func(h jobstore.ReadyHead) bool {
		if h.Seed {
			return true
		}
		o := orphanMsg{queue: tok, prio: int32(prio), id: h.Ref.JobID, token: h.Ref.Token}
		if !tl.unaccounted(o, now) {
			return true
		}
		if now.Sub(h.Time) < c.minAge {
			if young.IsZero() || h.Time.Before(young) {
				young = h.Time
			}
			return true
		}
		found[fmt.Sprintf(topology.ReadySubjectPattern, tok, topology.PriorityDigits, prio, topology.Token(o.id))] = o
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
	l.scanned, l.excess = now, false
	l.nextScan = now.Add(max(c.scanEvery, time.Duration(c.scanCost)*time.Since(began)))
	if !young.IsZero() {
		// Judged once old enough: looked at and scanned again then.
		at := young.Add(c.minAge)
		if at.Before(l.nextScan) {
			l.nextScan = at
		}
		l.excess = true
		if at.Before(l.nextCheck) {
			l.nextCheck = at
		}
	}
	return nil
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
