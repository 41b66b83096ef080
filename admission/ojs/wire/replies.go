package wire

import (
	"net/url"
	"strconv"
	"time"

	"github.com/jetgate/jetgate/admission/ojs"
)

// The success bodies that both bindings send. Building them here keeps the
// HTTP and NATS replies byte for byte the same.

// JobReply is {"job": {...}}.
type JobReply struct {
	Job *ojs.Job `json:"job"`
}

// AckReply is the body of a successful ACK (ojs-http-binding.md 10.2).
type AckReply struct {
	Acknowledged bool `json:"acknowledged"`
	*ojs.AckResult
}

// NewAckReply is the reply to an ACK that res answered.
func NewAckReply(res *ojs.AckResult) AckReply { return AckReply{true, res} }

// AppendJSON appends r encoded byte for byte as encoding/json encodes the
// struct, without its reflection: an ACK is answered once per job.
func (r AckReply) AppendJSON(b []byte) []byte {
	b = append(b, `{"acknowledged":`...)
	b = strconv.AppendBool(b, r.Acknowledged)
	if a := r.AckResult; a != nil {
		b = ojs.AppendString(append(b, `,"id":`...), a.ID)
		b = ojs.AppendString(append(b, `,"job_id":`...), a.JobID)
		b = ojs.AppendString(append(b, `,"state":`...), string(a.State))
		b = append(b, `,"completed_at":`...)
		if a.CompletedAt == nil {
			b = append(b, "null"...)
		} else {
			b = ojs.AppendTime(b, a.CompletedAt)
		}
	}
	return append(b, '}')
}

// MarshalJSON is AppendJSON for encoding/json.
func (r AckReply) MarshalJSON() ([]byte, error) { return r.AppendJSON(nil), nil }

// HeartbeatReply is the body of a BEAT (10.4).
type HeartbeatReply struct {
	State      string    `json:"state"`
	Extended   []string  `json:"jobs_extended"`
	Cancel     []string  `json:"jobs_to_cancel"`
	ServerTime *ojs.Time `json:"server_time"`
}

// NewHeartbeatReply fills the defaults of a BEAT's reply: state running,
// empty lists rather than null, the server time now when res has none.
func NewHeartbeatReply(res *ojs.HeartbeatResult) HeartbeatReply {
	if res == nil {
		res = &ojs.HeartbeatResult{}
	}
	out := HeartbeatReply{res.State, res.Extended, res.Cancel, ojs.NewTime(res.ServerTime)}
	if out.State == "" {
		out.State = ojs.WorkerRunning
	}
	if out.Extended == nil {
		out.Extended = []string{}
	}
	if out.Cancel == nil {
		out.Cancel = []string{}
	}
	if res.ServerTime.IsZero() {
		out.ServerTime = ojs.NewTime(time.Now())
	}
	return out
}

// QueueState is the answer to pause and resume (11.3, 11.4). Paused
// repeats Status as a boolean, as the admin API's queue objects carry it.
type QueueState struct {
	Queue     string    `json:"queue"`
	Status    string    `json:"status"`
	Paused    bool      `json:"paused"`
	PausedAt  *ojs.Time `json:"paused_at,omitempty"`
	ResumedAt *ojs.Time `json:"resumed_at,omitempty"`
}

// NewQueueState is the reply of a pause or resume of queue name.
func NewQueueState(name string, info *ojs.QueueInfo) QueueState {
	out := QueueState{Queue: info.Name, Status: info.Status, Paused: info.Status == ojs.QueuePaused,
		PausedAt: info.PausedAt, ResumedAt: info.ResumedAt}
	if out.Queue == "" {
		out.Queue = name
	}
	if out.Status == ojs.QueuePaused {
		out.ResumedAt = nil
	} else {
		out.PausedAt = nil
	}
	return out
}

// Page sizes of GET /ojs/v1/queues (ojs-http-binding.md 17.1).
const (
	queuesDefaultLimit = 50
	queuesMaxLimit     = 200
)

// QueuePage is the reply of GET /ojs/v1/queues (11.1).
type QueuePage struct {
	Queues     []ojs.QueueInfo `json:"queues"`
	Pagination ojs.Pagination  `json:"pagination"`
}

// QueuesPage reads the paging of a queue listing (limit, offset or
// cursor; 17).
func QueuesPage(q url.Values) (ojs.PageRequest, error) {
	page, err := ParsePage(q, queuesDefaultLimit, queuesMaxLimit)
	if err != nil {
		return page, err
	}
	if page.Cursor != "" {
		if page.Offset, err = DecodeCursor(page.Cursor); err != nil {
			return page, err
		}
	}
	return page, nil
}

// PageQueues cuts one page out of every queue (there are few, so the
// backend returns them all and the page is cut here).
func PageQueues(queues []ojs.QueueInfo, page ojs.PageRequest) QueuePage {
	total := len(queues)
	lo := min(page.Offset, total)
	hi := min(lo+page.Limit, total)
	out := QueuePage{
		Queues:     append([]ojs.QueueInfo{}, queues[lo:hi]...),
		Pagination: ojs.Pagination{Total: total, Limit: page.Limit, Offset: lo, HasMore: hi < total},
	}
	if out.Pagination.HasMore {
		out.Pagination.NextCursor = EncodeCursor(hi)
	}
	return out
}

// Page sizes of GET /ojs/v1/dead-letter (ojs-http-binding.md 12.1).
const (
	deadLetterDefaultLimit = 50
	deadLetterMaxLimit     = 100
)

// DeadLetterQuery reads ?queue=&limit=&offset=&cursor= of a dead letter
// listing (12.1).
func DeadLetterQuery(q url.Values) (ojs.DeadLetterQuery, error) {
	page, err := ParsePage(q, deadLetterDefaultLimit, deadLetterMaxLimit)
	if err != nil {
		return ojs.DeadLetterQuery{}, err
	}
	query := ojs.DeadLetterQuery{Queue: q.Get("queue"), Page: page}
	if query.Queue != "" {
		if err := CheckQueueName("queue", query.Queue); err != nil {
			return query, err
		}
	}
	return query, nil
}

// DeletedReply is the reply of a dead letter delete (12.3).
type DeletedReply struct {
	Deleted bool   `json:"deleted"`
	JobID   string `json:"job_id"`
}

// EventsReply is the reply of GET /ojs/v1/events: never null.
type EventsReply struct {
	Events []ojs.Event `json:"events"`
}

// NewEventsReply wraps evs.
func NewEventsReply(evs []ojs.Event) EventsReply {
	if evs == nil {
		evs = []ojs.Event{}
	}
	return EventsReply{evs}
}

// BatchReply is the reply of a batch enqueue (9.2).
type BatchReply struct {
	Jobs  []*ojs.Job `json:"jobs"`
	Count int        `json:"count"`
}

// DeduplicatedReply answers a unique job's duplicate with the existing
// job (ojs-unique-jobs.md 5.4: 200, not 201).
type DeduplicatedReply struct {
	Job          *ojs.Job `json:"job"`
	Deduplicated bool     `json:"deduplicated"`
}

// PatchReply is the reply of a PATCH that changed timeouts.
type PatchReply struct {
	Job              *ojs.Job `json:"job"`
	PreviousPriority int      `json:"previous_priority"`
}
