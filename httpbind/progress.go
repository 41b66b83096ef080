package httpbind

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/jetgate/jetgate/admission/ojs"
)

// ProgressBackend is what the progress endpoints ask of the layer below
// (ojs-progress.md 10). A Backend that also implements it gets the routes.
type ProgressBackend interface {
	ReportProgress(ctx context.Context, id string, u *ojs.ProgressUpdate) (*ojs.ProgressStatus, bool, error)
	Progress(ctx context.Context, id string) (*ojs.ProgressStatus, error)
	// WatchJob streams the job's record, current value first, until ctx
	// ends; the channel closes then.
	WatchJob(ctx context.Context, id string) (<-chan *ojs.Job, error)
}

// sseKeepAlive is how often an idle progress stream sends a comment, so
// proxies keep the connection open.
const sseKeepAlive = 15 * time.Second

func (s *server) progressRoutes() []route {
	pb, ok := s.b.(ProgressBackend)
	if !ok {
		return nil
	}
	body := s.cfg.MaxBodyBytes
	return []route{
		{http.MethodPut, "/ojs/v1/jobs/{id}/progress", func(w http.ResponseWriter, r *http.Request) {
			s.putProgress(w, r, pb)
		}, body},
		{http.MethodGet, "/ojs/v1/jobs/{id}/progress", func(w http.ResponseWriter, r *http.Request) {
			s.getProgress(w, r, pb)
		}, body},
		{http.MethodGet, "/ojs/v1/jobs/{id}/progress/stream", func(w http.ResponseWriter, r *http.Request) {
			s.streamProgress(w, r, pb)
		}, body},
	}
}

// putProgress is PUT /ojs/v1/jobs/{id}/progress (PRG-001):
// {"progress"?, "message"?, "data"?, "checkpoint"?}, progress clamped to
// [0, 1] (PRG-002); 200 with the progress now stored. An update for a job that is not active is ignored
// but answered 200 (PRG-007), with the job's state.
func (s *server) putProgress(w http.ResponseWriter, r *http.Request, pb ProgressBackend) {
	id, err := pathJobID(r, "job")
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	b, err := readBody(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	u, err := ojs.ParseProgressUpdate(b)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	st, _, err := pb.ReportProgress(r.Context(), id, u)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	progressHeaders(w, st)
	s.writeJSON(w, r, http.StatusOK, st)
}

// getProgress is GET /ojs/v1/jobs/{id}/progress (PRG-004): progress and
// data are null until reported; 404 only for an unknown job.
func (s *server) getProgress(w http.ResponseWriter, r *http.Request, pb ProgressBackend) {
	id, err := pathJobID(r, "job")
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	st, err := pb.Progress(r.Context(), id)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	progressHeaders(w, st)
	s.writeJSON(w, r, http.StatusOK, st)
}

// progressHeaders sets the headers of ojs-progress.md 10.3.
func progressHeaders(w http.ResponseWriter, st *ojs.ProgressStatus) {
	h := w.Header()
	h.Set("Cache-Control", "no-cache")
	if st.Progress != nil {
		h.Set("X-OJS-Progress", strconv.FormatFloat(*st.Progress, 'f', -1, 64))
	}
	if st.UpdatedAt != nil {
		h.Set("Last-Modified", st.UpdatedAt.UTC().Format(http.TimeFormat))
	}
}

// streamProgress is GET /ojs/v1/jobs/{id}/progress/stream (PRG-R003): a
// server-sent event "progress" for the current progress and each update,
// then "completed", "failed" (discarded) or "cancelled" when the job ends,
// and the stream closes.
func (s *server) streamProgress(w http.ResponseWriter, r *http.Request, pb ProgressBackend) {
	id, err := pathJobID(r, "job")
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	updates, err := pb.WatchJob(ctx, id)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	_ = rc.Flush()
	send := func(event string, v any) bool {
		b, err := json.Marshal(v)
		if err != nil {
			return false
		}
		if _, err := fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, b); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	keep := time.NewTicker(sseKeepAlive)
	defer keep.Stop()
	var last *ojs.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.closing:
			return
		case <-keep.C:
			if _, err := fmt.Fprint(w, ": keep-alive\n\n"); err != nil || rc.Flush() != nil {
				return
			}
		case j, ok := <-updates:
			if !ok {
				return
			}
			st := ojs.ProgressOf(j)
			if st.UpdatedAt != nil && (last == nil || !st.UpdatedAt.Equal(last.Time)) {
				last = st.UpdatedAt
				if !send("progress", st) {
					return
				}
			}
			if end, ok := map[ojs.State]string{
				ojs.StateCompleted: "completed", ojs.StateDiscarded: "failed", ojs.StateCancelled: "cancelled",
			}[j.State]; ok {
				send(end, st)
				return
			}
		}
	}
}
