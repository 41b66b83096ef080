package natsbind_test

import (
	"testing"

	"github.com/jetgate/jetgate/cmd/jetgate/app"
)

// Issue 19 "NATS binding": a job's life over NATS only, enqueue → get →
// fetch → ack, with a second ack answering 409 conflict in micro's error
// headers and the OJS envelope.
func TestIssue19JobLifeOverNATS(t *testing.T) {
	t.Parallel()
	f := setup(t, app.Config{})
	id := f.enqueue("life")
	got := f.nats("jobs.get", map[string]any{"id": id}).must(t, "get")
	if s := obj(got.body["job"])["state"]; s != "available" {
		t.Fatalf("state after enqueue = %v", s)
	}
	ids := f.fetchAll("life", 1)
	if ids[0] != id {
		t.Fatalf("fetched %s, want %s", ids[0], id)
	}
	a := f.nats("workers.ack", map[string]any{"job_id": id}).must(t, "ack")
	if a.body["acknowledged"] != true || a.body["state"] != "completed" {
		t.Fatalf("ack reply %s", a.raw)
	}
	a = f.nats("workers.ack", map[string]any{"job_id": id})
	if a.status != 409 || a.code != "conflict" || obj(a.body["error"])["code"] != "conflict" {
		t.Fatalf("second ack: %d %s %s", a.status, a.code, a.raw)
	}
}
