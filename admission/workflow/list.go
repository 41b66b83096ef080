package workflow

import (
	"context"
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetgate/jetgate/admission/ojs"
	"github.com/jetgate/jetgate/jetstream/jobstore"
	"github.com/jetgate/jetgate/jetstream/topology"
)

// Page sizes of GET /ojs/v1/workflows, the admin API listings' (wire's
// ParseAdminPage reads the query with them): 20, at most 100.
const (
	DefaultPerPage = 20
	MaxPerPage     = 100
)

// Workflows is GET /ojs/v1/workflows?page&per_page[&state] (issue 32): the
// workflows in state ("" for all), one page of summaries, in the order of
// their records' last change (the workflow bucket keeps one message per
// workflow, so its stream is the listing: nothing else is stored for it).
//
// The cost of a request is bounded as the admin job listing's is: it reads
// at most Config.MaxScan records, and a page number skips at most
// Config.MaxOffset matches; a page that meets the bound ends early with
// has_more and a next_cursor that goes on from there. A listing does not
// reconcile its workflows (GET /ojs/v1/workflows/{id} does): a running
// workflow whose last step's end no process recorded reads as running
// until its check timer or a GET records it. A workflow that changes
// while a client pages may be listed twice (at its old and its new
// place), never skipped.
func (e *Engine) Workflows(ctx context.Context, q ojs.WorkflowListQuery) (*ojs.WorkflowList, error) {
	state, err := listState(q.State)
	if err != nil {
		return nil, err
	}
	per := q.PerPage
	if per <= 0 {
		per = DefaultPerPage
	}
	per = min(per, MaxPerPage)
	from, page, skip, err := e.listStart(q, per)
	if err != nil {
		return nil, err
	}
	st, err := e.stream(ctx)
	if err != nil {
		return nil, err
	}
	out := &ojs.WorkflowList{Workflows: []*ojs.Workflow{}}
	prefix := "$KV." + topology.WorkflowsBucket + "."
	pos, err := jobstore.ScanStream(ctx, e.cfg.JS.Conn(), st, prefix+">", from, e.cfg.MaxScan, func(m *jetstream.RawStreamMsg) bool {
		if len(m.Data) == 0 || m.Header.Get("KV-Operation") != "" {
			return true // a deletion or expiry marker
		}
		r, err := decodeRecord(m.Data)
		if err != nil || r.ID != strings.TrimPrefix(m.Subject, prefix) || (state != "" && r.State != state) {
			return true
		}
		if skip > 0 {
			skip--
			return true
		}
		out.Workflows = append(out.Workflows, r.summary())
		return len(out.Workflows) < per
	})
	if err != nil {
		return nil, unavailable(err)
	}
	out.Scanned = pos.Read
	out.Pagination = ojs.AdminPagination{Page: page, PerPage: per, HasMore: !pos.Done}
	if !pos.Done {
		out.Pagination.NextCursor = listCursor{seq: pos.Next, page: page + 1}.encode()
	}
	return out, nil
}

// listState reads the state filter: a client's workflow state, or the
// "active" jetgate answered before issue 32 (read as running).
func listState(s string) (string, error) {
	switch s {
	case "", ojs.WorkflowPending, ojs.WorkflowRunning, ojs.WorkflowCompleted, ojs.WorkflowFailed, ojs.WorkflowCancelled:
		return s, nil
	case ojs.WorkflowLegacyActive:
		return ojs.WorkflowRunning, nil
	}
	return "", &ojs.ValidationError{Field: "state", Rule: "one of pending, running, completed, failed, cancelled",
		Received: strconv.Quote(s)}
}

// listStart is where a page starts: the sequence to read from, the page's
// number and the matches to skip before it.
func (e *Engine) listStart(q ojs.WorkflowListQuery, per int) (seq uint64, page, skip int, err error) {
	if q.Cursor != "" {
		c, err := decodeListCursor(q.Cursor)
		return c.seq, c.page, 0, err
	}
	page = max(q.Page, 1)
	skip = (page - 1) * per
	if skip > e.cfg.MaxOffset || skip < 0 {
		return 0, 0, 0, &ojs.ValidationError{Field: "page",
			Rule:     fmt.Sprintf("(page-1)*per_page at most %d; go further with pagination.next_cursor", e.cfg.MaxOffset),
			Received: strconv.Itoa(q.Page)}
	}
	return 1, page, skip, nil
}

// stream is the stream behind the workflow bucket, looked up once.
func (e *Engine) stream(ctx context.Context) (jetstream.Stream, error) {
	e.mu.Lock()
	st := e.kvStream
	e.mu.Unlock()
	if st != nil {
		return st, nil
	}
	st, err := e.cfg.JS.Stream(ctx, "KV_"+topology.WorkflowsBucket)
	if err != nil {
		return nil, unavailable(err)
	}
	e.mu.Lock()
	e.kvStream = st
	e.mu.Unlock()
	return st, nil
}

// listCursor is where a listing goes on: the stream sequence to read from
// and the number of the page it starts. Clients treat it as opaque.
type listCursor struct {
	seq  uint64
	page int
}

func (c listCursor) encode() string {
	return base64.RawURLEncoding.EncodeToString([]byte("w:" + strconv.FormatUint(c.seq, 10) + ":" + strconv.Itoa(c.page)))
}

func decodeListCursor(s string) (listCursor, error) {
	bad := &ojs.ValidationError{Field: "cursor", Rule: "a cursor returned as pagination.next_cursor"}
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return listCursor{}, bad
	}
	parts := strings.Split(string(b), ":")
	if len(parts) != 3 || parts[0] != "w" {
		return listCursor{}, bad
	}
	var c listCursor
	if c.seq, err = strconv.ParseUint(parts[1], 10, 64); err != nil || c.seq < 1 {
		return listCursor{}, bad
	}
	if c.page, err = strconv.Atoi(parts[2]); err != nil || c.page < 1 {
		return listCursor{}, bad
	}
	return c, nil
}

// summary is the record as a listing shows it: the workflow without its
// steps, its progress counted from what the record holds.
func (r *record) summary() *ojs.Workflow {
	w := r.view(nil)
	w.Steps, w.Callbacks = nil, nil
	return w
}
