package admin

import (
	"context"
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"

	"github.com/jetgate/jetgate/admission/ojs"
	"github.com/jetgate/jetgate/jetstream/jobstore"
)

// A listing walks up to two sources in turn: job records (phaseRecords)
// and ready messages (phaseReady). Available jobs come only from the ready
// stream, every other state only from records, and a listing of every
// state walks the records (skipping available ones) and then the ready
// stream.
const (
	phaseRecords = 'r'
	phaseReady   = 'q'
)

// cursor is where a listing goes on: the phase, the stream sequence to read
// from, and the number of the page it starts.
type cursor struct {
	phase byte
	seq   uint64
	page  int
}

func startCursor(f ojs.JobFilter) cursor {
	if f.State == ojs.StateAvailable {
		return cursor{phase: phaseReady, seq: 1, page: 1}
	}
	return cursor{phase: phaseRecords, seq: 1, page: 1}
}

func (c cursor) encode() string {
	s := fmt.Sprintf("%c:%d:%d", c.phase, c.seq, c.page)
	return base64.RawURLEncoding.EncodeToString([]byte(s))
}

func badCursor(field string) error {
	return &ojs.ValidationError{Field: field, Rule: "a cursor returned as pagination.next_cursor"}
}

// decodeCursor reads a cursor; it must belong to a listing of the same
// kind (a cursor of the ready stream for available jobs, and so on).
func decodeCursor(field, s string, f ojs.JobFilter) (cursor, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return cursor{}, badCursor(field)
	}
	parts := strings.Split(string(b), ":")
	if len(parts) != 3 || len(parts[0]) != 1 {
		return cursor{}, badCursor(field)
	}
	c := cursor{phase: parts[0][0]}
	c.seq, err = strconv.ParseUint(parts[1], 10, 64)
	if err != nil || c.seq < 1 {
		return cursor{}, badCursor(field)
	}
	c.page, err = strconv.Atoi(parts[2])
	if err != nil || c.page < 1 {
		return cursor{}, badCursor(field)
	}
	switch {
	case c.phase == phaseSorted:
	case c.phase == phaseReady && (f.State == "" || f.State == ojs.StateAvailable):
	case c.phase == phaseRecords && f.State != ojs.StateAvailable:
	default:
		return cursor{}, badCursor(field)
	}
	return c, nil
}

// AdminJobs is GET /ojs/v1/admin/jobs (ojs-admin-api.md 7.1): the jobs the
// filter matches, one page, in stream order (see the package doc).
func (a *Admin) AdminJobs(ctx context.Context, q ojs.JobListQuery) (*ojs.JobList, error) {
	per := q.PerPage
	if per <= 0 {
		per = DefaultPerPage
	}
	per = min(per, MaxPerPage)
	if q.Sort != "" {
		return a.sortedJobs(ctx, q, per)
	}
	cur, skip, err := a.position(q, per)
	if err != nil {
		return nil, err
	}
	out := &ojs.JobList{Items: []*ojs.Job{}}
	next, more, scanned, err := a.walk(ctx, q.Filter, cur, a.cfg.MaxScan, func(j *ojs.Job) bool {
		if skip > 0 {
			skip--
			return true
		}
		out.Items = append(out.Items, j)
		return len(out.Items) < per
	})
	if err != nil {
		return nil, err
	}
	out.Scanned = scanned
	out.Pagination = ojs.AdminPagination{Page: cur.page, PerPage: per, HasMore: more}
	if more {
		next.page = cur.page + 1
		out.Pagination.NextCursor = next.encode()
	}
	if q.Filter.Countable() {
		n, err := a.count(ctx, q.Filter)
		if err != nil {
			return nil, err
		}
		out.Pagination.Total = &n
	}
	return out, nil
}

// position is where a page starts: its cursor, or the start and the number
// of matches a page number skips.
func (a *Admin) position(q ojs.JobListQuery, per int) (cursor, int, error) {
	if q.Cursor != "" {
		c, err := decodeCursor("cursor", q.Cursor, q.Filter)
		if err == nil && c.phase == phaseSorted {
			err = badCursor("cursor") // a sorted listing's cursor, without sort
		}
		return c, 0, err
	}
	page := max(q.Page, 1)
	skip := (page - 1) * per
	if skip > a.cfg.MaxOffset || skip < 0 {
		return cursor{}, 0, &ojs.ValidationError{Field: "page",
			Rule:     fmt.Sprintf("(page-1)*per_page at most %d; go further with pagination.next_cursor", a.cfg.MaxOffset),
			Received: strconv.Itoa(q.Page)}
	}
	c := startCursor(q.Filter)
	c.page = page
	return c, skip, nil
}

// walk visits the jobs matching f from cur on, reading at most budget
// messages, until visit returns false. It returns where to go on and
// whether anything may be left to read.
func (a *Admin) walk(ctx context.Context, f ojs.JobFilter, cur cursor, budget int,
	visit func(*ojs.Job) bool) (next cursor, more bool, scanned int, err error) {
	if cur.phase == phaseRecords {
		stopped := false
		pos, err := a.rec.ScanRecords(ctx, cur.seq, budget, func(e jobstore.RecordEntry) bool {
			j := e.Job
			if j.State == ojs.StateAvailable || !f.Match(j) {
				return true // available jobs are listed from the ready stream
			}
			stopped = !visit(j)
			return !stopped
		})
		scanned, cur.seq = pos.Read, max(pos.Next, cur.seq)
		if err != nil || !pos.Done {
			return cur, err == nil, scanned, err
		}
		if f.State != "" {
			return cur, false, scanned, nil
		}
		// Every state: the ready stream is next.
		cur.phase, cur.seq = phaseReady, 1
		if stopped || scanned >= budget {
			return cur, true, scanned, nil
		}
	}
	pos, n, err := a.walkReady(ctx, f, cur.seq, budget-scanned, visit)
	scanned += n
	cur.seq = max(pos.Next, cur.seq)
	if err != nil {
		return cur, false, scanned, err
	}
	return cur, !pos.Done, scanned, nil
}

// readyChunk is how many ready messages walkReady reads before looking up
// their jobs' records in one batch.
const readyChunk = 100

// walkReady visits the available jobs matching f among the ready messages
// from sequence from on, reading at most budget messages: a chunk of ready
// messages at a time, then their jobs' records in one batched read. pos.Next
// is after the last message visited or skipped.
func (a *Admin) walkReady(ctx context.Context, f ojs.JobFilter, from uint64, budget int,
	visit func(*ojs.Job) bool) (pos jobstore.ScanPos, read int, err error) {
	pos.Next = from
	for read < budget {
		var entries []jobstore.ReadyEntry
		p, err := a.rec.ScanReady(ctx, f.Queue, pos.Next, min(readyChunk, budget-read), func(e jobstore.ReadyEntry) bool {
			entries = append(entries, e)
			return true
		})
		read += p.Read
		if err != nil {
			return pos, read, err
		}
		ids := make([]string, len(entries))
		for i, e := range entries {
			ids[i] = e.Ref.JobID
		}
		recs, err := a.rec.GetMany(ctx, ids)
		if err != nil {
			return pos, read, err
		}
		for i, e := range entries {
			j := readyJob(e, recs[e.Ref.JobID])
			if j == nil || !f.Match(j) {
				continue
			}
			if !visit(j) {
				pos.Next = e.Seq + 1
				pos.Done = p.Done && i == len(entries)-1
				return pos, read, nil
			}
		}
		pos.Next, pos.Done = max(p.Next, pos.Next), p.Done
		if p.Done {
			return pos, read, nil
		}
	}
	return pos, read, nil
}

// readyJob is the available job a ready message stands for, given the
// job's record (nil: none), or nil when the message is stale: the record
// moved on (another token, or no longer available), or there is no record
// and the message does not carry the job (its transition is in flight).
func readyJob(e jobstore.ReadyEntry, rec *ojs.Job) *ojs.Job {
	if rec != nil {
		if rec.State == ojs.StateAvailable && rec.Internal.Token == e.Ref.Token {
			return rec
		}
		return nil
	}
	if e.Job != nil && e.Job.Internal.Token == e.Ref.Token {
		j := e.Job
		if j.State == "" {
			j.State = ojs.StateAvailable
		}
		return j
	}
	return nil
}

// count is the number of jobs a filter without type or time bounds
// matches, from the counters.
func (a *Admin) count(ctx context.Context, f ojs.JobFilter) (int64, error) {
	queues := []string{f.Queue}
	if f.Queue == "" {
		qs, err := a.svc.ListQueues(ctx)
		if err != nil {
			return 0, err
		}
		queues = queues[:0]
		for _, q := range qs {
			queues = append(queues, q.Name)
		}
	}
	var n int64
	for _, q := range queues {
		c, err := a.svc.StateCounts(ctx, q)
		if err != nil {
			return 0, err
		}
		for st, v := range c {
			if f.State == "" || st == f.State {
				n += v
			}
		}
	}
	return n, nil
}
