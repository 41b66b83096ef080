package httpbind

import (
	"context"
	"net/http"

	"github.com/gorilla/mux"

	"github.com/jetgate/jetgate/admission/ojs"
	"github.com/jetgate/jetgate/admission/ojs/wire"
)

// listQueues is GET /ojs/v1/queues (11.1): {"queues":[...],"pagination":{...}}.
// The backend returns every queue (there are few); this handler pages them
// with limit and offset or cursor (17).
func (s *server) listQueues(w http.ResponseWriter, r *http.Request) {
	page, err := wire.QueuesPage(r.URL.Query())
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	queues, err := s.b.ListQueues(r.Context())
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.writeJSON(w, r, http.StatusOK, wire.PageQueues(queues, page))
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
	s.writeJSON(w, r, http.StatusOK, wire.NewQueueState(name, info))
}

// pathQueue returns the {name} of the path, checked against the queue name
// pattern (400 naming the field).
func pathQueue(r *http.Request) (string, error) {
	name := mux.Vars(r)["name"]
	return name, checkQueueName("name", name)
}
