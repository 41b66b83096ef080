package httpbind

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/jetgate/jetgate/admission/ojs"
)

// fakeAdmin adds AdminBackend to fakeBackend; it records the last listing
// query and bulk request it was given.
type fakeAdmin struct {
	*fakeBackend
	query ojs.JobListQuery
	bulk  ojs.BulkRequest
}

func (f *fakeAdmin) AdminStats(context.Context) (*ojs.AdminStats, error) {
	return &ojs.AdminStats{Jobs: map[ojs.State]int64{}}, nil
}
func (f *fakeAdmin) AdminQueues(context.Context, int, int) (*ojs.AdminQueueList, error) {
	return &ojs.AdminQueueList{Items: []ojs.AdminQueue{}}, nil
}
func (f *fakeAdmin) AdminQueue(_ context.Context, name string) (*ojs.AdminQueue, error) {
	return &ojs.AdminQueue{Name: name}, nil
}
func (f *fakeAdmin) AdminJobs(_ context.Context, q ojs.JobListQuery) (*ojs.JobList, error) {
	f.query = q
	return &ojs.JobList{Items: []*ojs.Job{}}, nil
}
func (f *fakeAdmin) BulkJobs(_ context.Context, r ojs.BulkRequest) (*ojs.BulkResult, error) {
	f.bulk = r
	return &ojs.BulkResult{Action: r.Action, Errors: []ojs.BulkError{}}, nil
}
func (f *fakeAdmin) DeadLetterStats(context.Context) (*ojs.DeadLetterStats, error) {
	return &ojs.DeadLetterStats{ByQueue: map[string]int64{}}, nil
}

// FuzzAdminRequests feeds arbitrary listing queries and bulk bodies to the
// admin endpoints: the answer is 200, 400 naming a field, or 404, never a
// 500 or a panic; a bulk request reaches the backend only with
// "confirm": true (ojs-admin-api.md 4, 8).
func FuzzAdminRequests(f *testing.F) {
	for _, seed := range []struct{ query, body string }{
		{"state=available&queue=email&per_page=50", `{"filter":{"queue":"email","state":"discarded"},"confirm":true}`},
		{"type=email.*&since=2026-02-13T00:00:00Z&page=2", `{"filter":{"type":"a*","until":"2026-02-06T00:00:00Z"},"confirm":true,"limit":10}`},
		{"cursor=cjoxOjE&order=asc", `{"confirm":false}`},
		{"sort=priority", `{"confirm":"yes"}`},
		{"page=0&per_page=-1", `{"filter":[],"confirm":true}`},
		{"%zz", `{`},
	} {
		f.Add(seed.query, seed.body)
	}
	fake := &fakeAdmin{fakeBackend: &fakeBackend{}}
	h, err := New(fake, Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		f.Fatal(err)
	}
	check := func(t *testing.T, rec *httptest.ResponseRecorder, what string) {
		switch rec.Code {
		case http.StatusOK, http.StatusNotFound:
		case http.StatusBadRequest:
			var e struct {
				Error struct {
					Details struct {
						Field string `json:"field"`
					} `json:"details"`
				} `json:"error"`
			}
			if json.Unmarshal(rec.Body.Bytes(), &e) != nil || e.Error.Details.Field == "" {
				t.Fatalf("%s: 400 without a field: %s", what, rec.Body)
			}
		default:
			t.Fatalf("%s: status %d: %s", what, rec.Code, rec.Body)
		}
	}
	f.Fuzz(func(t *testing.T, query, body string) {
		req := httptest.NewRequest(http.MethodGet, "/ojs/v1/admin/jobs", nil)
		req.URL.RawQuery = query
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		check(t, rec, "GET ?"+query)
		if rec.Code == http.StatusOK && fake.query.PerPage > adminMaxPerPage {
			t.Fatalf("per_page %d passed on", fake.query.PerPage)
		}

		fake.bulk = ojs.BulkRequest{}
		req = httptest.NewRequest(http.MethodPost, "/ojs/v1/admin/jobs/bulk/delete", strings.NewReader(body))
		req.Header.Set("Content-Type", MediaType)
		rec = httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		check(t, rec, "bulk "+body)
		var o map[string]json.RawMessage
		confirmed := json.Unmarshal([]byte(body), &o) == nil && string(o["confirm"]) == "true"
		if fake.bulk.Action != "" && !confirmed {
			t.Fatalf("bulk %q ran without confirm: true", body)
		}
	})
}
