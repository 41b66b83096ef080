package httpbind

import (
	"context"
	"net/http"

	"github.com/gorilla/mux"

	"github.com/jetgate/jetgate/admission/ojs"
)

// Page sizes of GET /ojs/v1/queues (ojs-http-binding.md 17.1).
const (
	queuesDefaultLimit = 50
	queuesMaxLimit     = 200
)

// listQueues is GET /ojs/v1/queues (11.1): {"queues":[...],"pagination":{...}}.
// The backend returns every queue (there are few); this handler pages them
// with limit and offset or cursor (17).
func (s *server) listQueues(w http.ResponseWriter, r *http.Request) {
	page, err := parsePage(r.URL.Query(), queuesDefaultLimit, queuesMaxLimit)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if page.Cursor != "" {
		if page.Offset, err = decodeCursor(page.Cursor); err != nil {
			s.writeError(w, r, err)
			return
		}
	}
	queues, err := s.b.ListQueues(r.Context())
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	total := len(queues)
	lo := min(page.Offset, total)
	hi := min(lo+page.Limit, total)
	out := struct {
		Queues     []ojs.QueueInfo `json:"queues"`
		Pagination ojs.Pagination  `json:"pagination"`
	}{
		Queues:     append([]ojs.QueueInfo{}, queues[lo:hi]...),
		Pagination: ojs.Pagination{Total: total, Limit: page.Limit, Offset: lo, HasMore: hi < total},
	}
	if out.Pagination.HasMore {
		out.Pagination.NextCursor = encodeCursor(hi)
	}
	s.writeJSON(w, r, http.StatusOK, out)
}

// queueStats is GET /ojs/v1/queues/{name}/stats (11.2).
func (s *server) queueStats(w http.ResponseWriter, r *http.Request) {
	name, err := pathQueue(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	stats, err := s.b.QueueStats(r.Context(), name)
	s.answer(w, r, stats, err)
}

// queueState is the answer to pause and resume (11.3, 11.4). Paused
// repeats Status as a boolean, as the admin API's queue objects carry it.
type queueState struct {
	Queue     string    `json:"queue"`
	Status    string    `json:"status"`
	Paused    bool      `json:"paused"`
	PausedAt  *ojs.Time `json:"paused_at,omitempty"`
	ResumedAt *ojs.Time `json:"resumed_at,omitempty"`
}

// pauseQueue is POST /ojs/v1/queues/{name}/pause (11.3). A body, if any,
// is not read.
func (s *server) pauseQueue(w http.ResponseWriter, r *http.Request) {
	s.setQueueState(w, r, s.b.PauseQueue)
}

// resumeQueue is POST /ojs/v1/queues/{name}/resume (11.4).
func (s *server) resumeQueue(w http.ResponseWriter, r *http.Request) {
	s.setQueueState(w, r, s.b.ResumeQueue)
}

func (s *server) setQueueState(w http.ResponseWriter, r *http.Request,
	op func(ctx context.Context, name string) (*ojs.QueueInfo, error)) {
	name, err := pathQueue(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	info, err := op(r.Context(), name)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := queueState{Queue: info.Name, Status: info.Status, Paused: info.Status == ojs.QueuePaused,
		PausedAt: info.PausedAt, ResumedAt: info.ResumedAt}
	if out.Queue == "" {
		out.Queue = name
	}
	if out.Status == ojs.QueuePaused {
		out.ResumedAt = nil
	} else {
		out.PausedAt = nil
	}
	s.writeJSON(w, r, http.StatusOK, out)
}

// pathQueue returns the {name} of the path, checked against the queue name
// pattern (400 naming the field).
func pathQueue(r *http.Request) (string, error) {
	name := mux.Vars(r)["name"]
	return name, checkQueueName("name", name)
}
