package natsbind_test

import (
	"fmt"
	"net/url"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/jetgate/jetgate/cmd/jetgate/app"
)

// twin is one operation sent over both bindings: the same request as
// HTTP (method, path, body) and as NATS (subject, body with the path's
// values as fields).
type twin struct {
	name string
	// prep runs once per binding (tag "h" or "n") and returns what the
	// request names, e.g. a job id in the state the operation needs.
	prep func(f *fixture, tag string) string
	http func(v string) (method, path string, body any)
	nats func(v string) (op string, body any)
	// status is the HTTP status both must answer (any 2xx for NATS when
	// HTTP answers 2xx); code the OJS error code of an error.
	status int
	code   string
	// field is the details.field an error names over HTTP and NATS ("" when
	// none); natsField when NATS names it differently (the path's {name}
	// is the body's "queue").
	field, natsField string
}

const unknownID = "019a0000-0000-7000-8000-000000000000"

func none(*fixture, string) string { return "" }

// available enqueues a job on a queue of its own and returns its id.
func available(f *fixture, tag string) string { return f.enqueue("tw-" + tag) }

// active enqueues a job and claims it.
func active(f *fixture, tag string) string {
	q := "tw-active-" + tag
	f.enqueue(q)
	return f.fetchAll(q, 1)[0]
}

var cronSeq atomic.Int64

func cronBody(name string) map[string]any {
	return map[string]any{"name": name, "cron": "@daily", "type": "twin.cron", "args": []any{}}
}

// cronJob registers a cron job of its own and returns its name.
func cronJob(f *fixture, tag string) string {
	name := fmt.Sprintf("tw-cj-%s-%d", tag, cronSeq.Add(1))
	f.nats("cron.register", cronBody(name)).must(f.t, "cron register")
	return name
}

func chainBody() map[string]any {
	return map[string]any{"type": "chain", "steps": []any{job(nil), job(nil)}}
}

// workflow creates a chain and returns its id.
func workflow(f *fixture, _ string) string {
	a := f.nats("workflows.create", chainBody()).must(f.t, "workflow")
	return obj(a.body["workflow"])["id"].(string)
}

func job(extra map[string]any) map[string]any {
	j := map[string]any{"type": "twin.job", "queue": "twins", "args": []any{"a"}}
	for k, v := range extra {
		j[k] = v
	}
	return j
}

func twins() []twin {
	path := func(method, p string, body any) func(string) (string, string, any) {
		return func(v string) (string, string, any) {
			return method, strings.ReplaceAll(p, "{}", url.PathEscape(v)), body
		}
	}
	subj := func(op string, body func(v string) any) func(string) (string, any) {
		return func(v string) (string, any) { return op, body(v) }
	}
	fixed := func(b any) func(string) any { return func(string) any { return b } }
	named := func(field string) func(string) any {
		return func(v string) any { return map[string]any{field: v} }
	}
	withID := func(extra map[string]any) func(string) any {
		return func(v string) any {
			m := map[string]any{"id": v}
			for k, x := range extra {
				m[k] = x
			}
			return m
		}
	}
	jobID := func(extra map[string]any) func(string) any {
		return func(v string) any {
			m := map[string]any{"job_id": v}
			for k, x := range extra {
				m[k] = x
			}
			return m
		}
	}
	return []twin{
		{name: "health", prep: none, http: path("GET", "/ojs/v1/health", nil), nats: subj("health", fixed(nil)), status: 200},

		// ojs-http-binding.md 9.1 PUSH.
		{name: "enqueue", prep: none, http: path("POST", "/ojs/v1/jobs", job(nil)), nats: subj("jobs.enqueue", fixed(job(nil))), status: 201},
		{name: "enqueue/no type", prep: none, http: path("POST", "/ojs/v1/jobs", map[string]any{"queue": "q", "args": []any{}}),
			nats: subj("jobs.enqueue", fixed(map[string]any{"queue": "q", "args": []any{}})), status: 400, code: "invalid_payload", field: "type"},
		{name: "enqueue/malformed", prep: none, http: path("POST", "/ojs/v1/jobs", `{"type":`),
			nats: subj("jobs.enqueue", fixed(`{"type":`)), status: 400, code: "invalid_payload", field: "body"},
		// 9.2 batch.
		{name: "batch", prep: none, http: path("POST", "/ojs/v1/jobs/batch", map[string]any{"jobs": []any{job(nil), job(nil)}}),
			nats: subj("jobs.batch", fixed(map[string]any{"jobs": []any{job(nil), job(nil)}})), status: 201},
		{name: "batch/empty", prep: none, http: path("POST", "/ojs/v1/jobs/batch", map[string]any{"jobs": []any{}}),
			nats: subj("jobs.batch", fixed(map[string]any{"jobs": []any{}})), status: 400, code: "invalid_payload", field: "jobs"},
		// 9.3 INFO.
		{name: "get", prep: available, http: path("GET", "/ojs/v1/jobs/{}", nil), nats: subj("jobs.get", withID(nil)), status: 200},
		{name: "get/unknown", prep: func(*fixture, string) string { return unknownID }, http: path("GET", "/ojs/v1/jobs/{}", nil),
			nats: subj("jobs.get", withID(nil)), status: 404, code: "not_found"},
		{name: "get/not an id", prep: func(*fixture, string) string { return "nope" }, http: path("GET", "/ojs/v1/jobs/{}", nil),
			nats: subj("jobs.get", withID(nil)), status: 404, code: "not_found"},
		// 9.4 CANCEL.
		{name: "cancel", prep: available, http: path("DELETE", "/ojs/v1/jobs/{}", nil), nats: subj("jobs.cancel", withID(nil)), status: 200},
		{name: "cancel/cancelled", prep: func(f *fixture, tag string) string {
			id := available(f, tag)
			f.nats("jobs.cancel", map[string]any{"id": id}).must(f.t, "cancel")
			return id
		}, http: path("DELETE", "/ojs/v1/jobs/{}", nil), nats: subj("jobs.cancel", withID(nil)), status: 409, code: "conflict"},
		// 9.5 ACTIVATE: only a pending job.
		{name: "activate/available", prep: available, http: path("POST", "/ojs/v1/jobs/{}/activate", nil),
			nats: subj("jobs.activate", withID(nil)), status: 409, code: "conflict"},
		// PATCH (ojs-priority.md 8.1, ojs-timeouts.md 12.3).
		{name: "patch", prep: available, http: path("PATCH", "/ojs/v1/jobs/{}", map[string]any{"priority": 1}),
			nats: subj("jobs.patch", withID(map[string]any{"priority": 1})), status: 200},
		{name: "patch/unknown field", prep: available, http: path("PATCH", "/ojs/v1/jobs/{}", map[string]any{"colour": 1}),
			nats: subj("jobs.patch", withID(map[string]any{"colour": 1})), status: 400, code: "invalid_request", field: "colour"},
		// 10.1 FETCH.
		{name: "fetch/empty", prep: none, http: path("POST", "/ojs/v1/workers/fetch", map[string]any{"queues": []string{"tw-none"}}),
			nats: subj("workers.fetch", fixed(map[string]any{"queues": []string{"tw-none"}})), status: 200},
		{name: "fetch/no queues", prep: none, http: path("POST", "/ojs/v1/workers/fetch", map[string]any{"count": 1}),
			nats: subj("workers.fetch", fixed(map[string]any{"count": 1})), status: 400, code: "invalid_request", field: "queues"},
		{name: "fetch/bad count", prep: none, http: path("POST", "/ojs/v1/workers/fetch", map[string]any{"queues": []string{"a"}, "count": 0}),
			nats: subj("workers.fetch", fixed(map[string]any{"queues": []string{"a"}, "count": 0})), status: 400, code: "invalid_request", field: "count"},
		// 10.2 ACK, 10.3 FAIL.
		{name: "ack", prep: active, http: nil, nats: subj("workers.ack", jobID(nil)), status: 200},
		{name: "ack/unknown", prep: func(*fixture, string) string { return unknownID }, http: func(v string) (string, string, any) {
			return "POST", "/ojs/v1/workers/ack", map[string]any{"job_id": v}
		}, nats: subj("workers.ack", jobID(nil)), status: 404, code: "not_found"},
		{name: "ack/no job_id", prep: none, http: path("POST", "/ojs/v1/workers/ack", map[string]any{}),
			nats: subj("workers.ack", fixed(map[string]any{})), status: 400, code: "invalid_request", field: "job_id"},
		{name: "nack", prep: active, http: nil, nats: subj("workers.nack", jobID(map[string]any{"error": map[string]any{"message": "boom"}})), status: 200},
		{name: "nack/no error", prep: active, http: nil, nats: subj("workers.nack", jobID(nil)), status: 400, code: "invalid_request", field: "error"},
		// 10.4 BEAT.
		{name: "heartbeat", prep: none, http: path("POST", "/ojs/v1/workers/heartbeat", map[string]any{"worker_id": "w-1"}),
			nats: subj("workers.heartbeat", fixed(map[string]any{"worker_id": "w-1"})), status: 200},
		{name: "heartbeat/no worker", prep: none, http: path("POST", "/ojs/v1/workers/heartbeat", map[string]any{}),
			nats: subj("workers.heartbeat", fixed(map[string]any{})), status: 400, code: "invalid_request", field: "worker_id"},
		// ojs-progress.md 10 (PRG-001, PRG-004).
		{name: "progress/put", prep: active, http: path("PUT", "/ojs/v1/jobs/{}/progress", map[string]any{"progress": 0.5}),
			nats: subj("workers.progress", withID(map[string]any{"progress": 0.5})), status: 200},
		{name: "progress/put bad", prep: active, http: path("PUT", "/ojs/v1/jobs/{}/progress", map[string]any{"progress": "half"}),
			nats: subj("workers.progress", withID(map[string]any{"progress": "half"})), status: 400, code: "invalid_request", field: "progress"},
		{name: "progress/get", prep: available, http: path("GET", "/ojs/v1/jobs/{}/progress", nil),
			nats: subj("jobs.progress", withID(nil)), status: 200},
		// 11 queues.
		{name: "queues/list", prep: none, http: path("GET", "/ojs/v1/queues?limit=2", nil),
			nats: subj("queues.list", fixed(map[string]any{"limit": 2})), status: 200},
		{name: "queues/list bad limit", prep: none, http: path("GET", "/ojs/v1/queues?limit=0", nil),
			nats: subj("queues.list", fixed(map[string]any{"limit": 0})), status: 400, code: "invalid_request", field: "limit"},
		{name: "queues/stats", prep: none, http: path("GET", "/ojs/v1/queues/twins/stats", nil),
			nats: subj("queues.stats", fixed(map[string]any{"queue": "twins"})), status: 200},
		{name: "queues/stats bad name", prep: none, http: path("GET", "/ojs/v1/queues/Bad_Name/stats", nil),
			nats: subj("queues.stats", fixed(map[string]any{"queue": "Bad_Name"})), status: 400, code: "invalid_request", field: "name", natsField: "queue"},
		{name: "queues/pause", prep: none, http: path("POST", "/ojs/v1/queues/tw-paused/pause", nil),
			nats: subj("queues.pause", fixed(map[string]any{"queue": "tw-paused"})), status: 200},
		{name: "queues/resume", prep: none, http: path("POST", "/ojs/v1/queues/tw-paused/resume", nil),
			nats: subj("queues.resume", fixed(map[string]any{"queue": "tw-paused"})), status: 200},
		// ojs-backpressure.md 6.2 queue config.
		{name: "queues/config get", prep: none, http: path("GET", "/ojs/v1/queues/twins/config", nil),
			nats: subj("queues.config", fixed(map[string]any{"queue": "twins"})), status: 200},
		{name: "queues/config put", prep: none, http: path("PUT", "/ojs/v1/queues/tw-bound/config", map[string]any{"backpressure": map[string]any{"max_depth": 10}}),
			nats: subj("queues.config", fixed(map[string]any{"queue": "tw-bound", "backpressure": map[string]any{"max_depth": 10}})), status: 200},
		{name: "queues/config put bad", prep: none, http: path("PUT", "/ojs/v1/queues/tw-bound/config", map[string]any{"backpressure": map[string]any{"max_depth": -1}}),
			nats: subj("queues.config", fixed(map[string]any{"queue": "tw-bound", "backpressure": map[string]any{"max_depth": -1}})), status: 400, code: "invalid_request", field: "backpressure.max_depth"},
		// ojs-rate-limiting.md 10.
		{name: "ratelimits/list", prep: none, http: path("GET", "/ojs/v1/rate-limits", nil), nats: subj("ratelimits.list", fixed(nil)), status: 200},
		{name: "ratelimits/override", prep: none, http: path("PUT", "/ojs/v1/rate-limits/tenant:acme", map[string]any{"concurrency": 2}),
			nats: subj("ratelimits.override", fixed(map[string]any{"key": "tenant:acme", "concurrency": 2})), status: 200},
		{name: "ratelimits/get", prep: none, http: path("GET", "/ojs/v1/rate-limits/tenant:acme", nil),
			nats: subj("ratelimits.get", fixed(map[string]any{"key": "tenant:acme"})), status: 200},
		{name: "ratelimits/override empty", prep: none, http: path("PUT", "/ojs/v1/rate-limits/tenant:acme", map[string]any{}),
			nats: subj("ratelimits.override", fixed(map[string]any{"key": "tenant:acme"})), status: 400, code: "invalid_request", field: "concurrency"},
		{name: "ratelimits/bad key", prep: none, http: path("GET", "/ojs/v1/rate-limits/-bad", nil),
			nats: subj("ratelimits.get", fixed(map[string]any{"key": "-bad"})), status: 400, code: "invalid_request", field: "key"},
		{name: "ratelimits/clear", prep: none, http: path("DELETE", "/ojs/v1/rate-limits/tenant:acme", nil),
			nats: subj("ratelimits.clear", fixed(map[string]any{"key": "tenant:acme"})), status: 200},
		// ojs-rate-limiting.md 7.2: a queue's own limit.
		{name: "queues/ratelimit set", prep: none, http: path("PUT", "/ojs/v1/admin/queues/tw-rl/rate-limit", map[string]any{"concurrency": 3}),
			nats: subj("queues.ratelimit", fixed(map[string]any{"queue": "tw-rl", "concurrency": 3})), status: 200},
		{name: "queues/ratelimit get", prep: none, http: path("GET", "/ojs/v1/admin/queues/tw-rl/rate-limit", nil),
			nats: subj("queues.ratelimit", fixed(map[string]any{"queue": "tw-rl"})), status: 200},
		{name: "queues/ratelimit bad", prep: none, http: path("PUT", "/ojs/v1/admin/queues/tw-rl/rate-limit", map[string]any{"concurrency": -1}),
			nats: subj("queues.ratelimit", fixed(map[string]any{"queue": "tw-rl", "concurrency": -1})), status: 400, code: "invalid_request", field: "concurrency"},
		{name: "queues/ratelimit clear", prep: none, http: path("DELETE", "/ojs/v1/admin/queues/tw-rl/rate-limit", nil),
			nats: subj("queues.clearratelimit", fixed(map[string]any{"queue": "tw-rl"})), status: 200},
		// ojs-admin-api.md 6-11: the operator API.
		{name: "admin/stats", prep: none, http: path("GET", "/ojs/v1/admin/stats", nil), nats: subj("admin.stats", fixed(nil)), status: 200},
		{name: "admin/queues", prep: none, http: path("GET", "/ojs/v1/admin/queues?per_page=5", nil),
			nats: subj("admin.queues", fixed(map[string]any{"per_page": 5})), status: 200},
		{name: "admin/queue", prep: none, http: path("GET", "/ojs/v1/admin/queues/twins", nil),
			nats: subj("admin.queue", fixed(map[string]any{"queue": "twins"})), status: 200},
		{name: "admin/jobs", prep: none, http: path("GET", "/ojs/v1/admin/jobs?queue=twins&state=available&per_page=3", nil),
			nats: subj("admin.jobs", fixed(map[string]any{"queue": "twins", "state": "available", "per_page": 3})), status: 200},
		{name: "admin/jobs bad state", prep: none, http: path("GET", "/ojs/v1/admin/jobs?state=lost", nil),
			nats: subj("admin.jobs", fixed(map[string]any{"state": "lost"})), status: 400, code: "invalid_request", field: "state"},
		{name: "admin/job", prep: available, http: path("GET", "/ojs/v1/admin/jobs/{}", nil), nats: subj("admin.job", withID(nil)), status: 200},
		{name: "admin/deadletter", prep: none, http: path("GET", "/ojs/v1/admin/dead-letter", nil), nats: subj("admin.deadletter", fixed(nil)), status: 200},
		{name: "admin/bulk unconfirmed", prep: none, http: path("POST", "/ojs/v1/admin/jobs/bulk/cancel", map[string]any{"filter": map[string]any{"queue": "nothing"}}),
			nats: subj("admin.bulk", fixed(map[string]any{"action": "cancel", "filter": map[string]any{"queue": "nothing"}})), status: 400, code: "invalid_request", field: "confirm"},
		{name: "admin/bulk unknown action", prep: none, http: path("POST", "/ojs/v1/admin/jobs/bulk/explode", map[string]any{"confirm": true}),
			nats: subj("admin.bulk", fixed(map[string]any{"action": "explode", "confirm": true})), status: 404, code: "not_found"},
		{name: "admin/bulk", prep: none, http: path("POST", "/ojs/v1/admin/jobs/bulk/cancel", map[string]any{"filter": map[string]any{"queue": "tw-nothing"}, "confirm": true}),
			nats: subj("admin.bulk", fixed(map[string]any{"action": "cancel", "filter": map[string]any{"queue": "tw-nothing"}, "confirm": true})), status: 200},
		{name: "deadletter/stats", prep: none, http: path("GET", "/ojs/v1/dead-letter/stats", nil), nats: subj("deadletter.stats", fixed(nil)), status: 200},
		// 13 cron.
		{name: "cron/register", prep: func(_ *fixture, tag string) string { return "tw-cron-" + tag },
			http: func(v string) (string, string, any) { return "POST", "/ojs/v1/cron", cronBody(v) },
			nats: func(v string) (string, any) { return "cron.register", cronBody(v) }, status: 201},
		{name: "cron/register no cron", prep: none, http: path("POST", "/ojs/v1/cron", map[string]any{"name": "x", "type": "a.b"}),
			nats: subj("cron.register", fixed(map[string]any{"name": "x", "type": "a.b"})), status: 400, code: "invalid_request", field: "cron"},
		{name: "cron/list", prep: none, http: path("GET", "/ojs/v1/cron?limit=1", nil), nats: subj("cron.list", fixed(map[string]any{"limit": 1})), status: 200},
		{name: "cron/get", prep: cronJob, http: path("GET", "/ojs/v1/cron/{}", nil), nats: subj("cron.get", named("name")), status: 200},
		{name: "cron/get unknown", prep: none, http: path("GET", "/ojs/v1/cron/tw-none", nil),
			nats: subj("cron.get", fixed(map[string]any{"name": "tw-none"})), status: 404, code: "not_found"},
		{name: "cron/delete", prep: cronJob, http: path("DELETE", "/ojs/v1/cron/{}", nil), nats: subj("cron.delete", named("name")), status: 200},
		// 14 workflows.
		{name: "workflows/create", prep: none, http: path("POST", "/ojs/v1/workflows", chainBody()),
			nats: subj("workflows.create", fixed(chainBody())), status: 201},
		{name: "workflows/create bad", prep: none, http: path("POST", "/ojs/v1/workflows", map[string]any{"type": "tree", "steps": []any{job(nil)}}),
			nats: subj("workflows.create", fixed(map[string]any{"type": "tree", "steps": []any{job(nil)}})), status: 400, code: "invalid_request", field: "type"},
		{name: "workflows/get", prep: workflow, http: path("GET", "/ojs/v1/workflows/{}", nil), nats: subj("workflows.get", withID(nil)), status: 200},
		{name: "workflows/cancel", prep: workflow, http: path("DELETE", "/ojs/v1/workflows/{}", nil), nats: subj("workflows.cancel", withID(nil)), status: 200},
		{name: "workflows/get unknown", prep: func(*fixture, string) string { return unknownID }, http: path("GET", "/ojs/v1/workflows/{}", nil),
			nats: subj("workflows.get", withID(nil)), status: 404, code: "not_found"},
		// Workers: beat, health, the admin API's worker calls (9).
		{name: "workers/beat", prep: none, http: path("POST", "/ojs/v1/workers/beat", map[string]any{"worker_id": "tw-w1", "state": "quiet"}),
			nats: subj("workers.beat", fixed(map[string]any{"worker_id": "tw-w1", "state": "quiet"})), status: 200},
		{name: "workers/beat bad state", prep: none, http: path("POST", "/ojs/v1/workers/beat", map[string]any{"worker_id": "tw-w1", "state": "asleep"}),
			nats: subj("workers.beat", fixed(map[string]any{"worker_id": "tw-w1", "state": "asleep"})), status: 400, code: "invalid_request", field: "state"},
		{name: "workers/health", prep: none, http: path("GET", "/ojs/v1/workers/tw-w1/health", nil),
			nats: subj("workers.health", fixed(map[string]any{"id": "tw-w1"})), status: 200},
		{name: "admin/workers", prep: none, http: path("GET", "/ojs/v1/admin/workers?per_page=2", nil),
			nats: subj("admin.workers", fixed(map[string]any{"per_page": 2})), status: 200},
		{name: "admin/worker", prep: none, http: path("GET", "/ojs/v1/admin/workers/tw-w1", nil),
			nats: subj("admin.worker", fixed(map[string]any{"id": "tw-w1"})), status: 200},
		{name: "admin/worker quiet", prep: none, http: path("POST", "/ojs/v1/admin/workers/tw-w1/quiet", nil),
			nats: subj("admin.workerquiet", fixed(map[string]any{"id": "tw-w1"})), status: 200},
		{name: "admin/worker deregister live", prep: none, http: path("DELETE", "/ojs/v1/admin/workers/tw-w1", nil),
			nats: subj("admin.workerderegister", fixed(map[string]any{"id": "tw-w1"})), status: 409, code: "conflict"},
		{name: "admin/worker unknown", prep: none, http: path("GET", "/ojs/v1/admin/workers/tw-nobody", nil),
			nats: subj("admin.worker", fixed(map[string]any{"id": "tw-nobody"})), status: 404, code: "not_found"},
		// Fair scheduling pools (10), worker groups and aging (ojs-priority.md).
		{name: "pools/set", prep: none, http: path("PUT", "/ojs/v1/admin/pools/tw-pool", map[string]any{"queues": []any{"pa", "pb"}}),
			nats: subj("pools.set", fixed(map[string]any{"pool": "tw-pool", "queues": []any{"pa", "pb"}})), status: 200},
		{name: "pools/set bad", prep: none, http: path("PUT", "/ojs/v1/admin/pools/tw-pool", map[string]any{"queues": []any{}}),
			nats: subj("pools.set", fixed(map[string]any{"pool": "tw-pool", "queues": []any{}})), status: 400, code: "invalid_request", field: "queues"},
		{name: "pools/get", prep: none, http: path("GET", "/ojs/v1/admin/pools/tw-pool", nil),
			nats: subj("pools.get", fixed(map[string]any{"pool": "tw-pool"})), status: 200},
		{name: "pools/list", prep: none, http: path("GET", "/ojs/v1/admin/pools", nil), nats: subj("pools.list", fixed(nil)), status: 200},
		{name: "pools/stats", prep: none, http: path("GET", "/ojs/v1/admin/scheduling/stats", nil), nats: subj("pools.stats", fixed(nil)), status: 200},
		{name: "pools/delete unknown", prep: none, http: path("DELETE", "/ojs/v1/admin/pools/tw-nopool", nil),
			nats: subj("pools.delete", fixed(map[string]any{"pool": "tw-nopool"})), status: 404, code: "not_found"},
		{name: "groups/set", prep: none, http: path("PUT", "/ojs/v1/admin/worker-groups/tw-group", map[string]any{"strategy": "strict", "queues": []any{"ga"}}),
			nats: subj("groups.set", fixed(map[string]any{"group": "tw-group", "strategy": "strict", "queues": []any{"ga"}})), status: 200},
		{name: "groups/set bad", prep: none, http: path("PUT", "/ojs/v1/admin/worker-groups/tw-group", map[string]any{"queues": []any{"ga"}}),
			nats: subj("groups.set", fixed(map[string]any{"group": "tw-group", "queues": []any{"ga"}})), status: 400, code: "invalid_request", field: "strategy"},
		{name: "groups/get", prep: none, http: path("GET", "/ojs/v1/admin/worker-groups/tw-group", nil),
			nats: subj("groups.get", fixed(map[string]any{"group": "tw-group"})), status: 200},
		{name: "groups/list", prep: none, http: path("GET", "/ojs/v1/admin/worker-groups", nil), nats: subj("groups.list", fixed(nil)), status: 200},
		{name: "groups/bad name", prep: none, http: path("GET", "/ojs/v1/admin/worker-groups/Bad_Group", nil),
			nats: subj("groups.get", fixed(map[string]any{"group": "Bad_Group"})), status: 400, code: "invalid_request", field: "group"},
		{name: "queues/aging set", prep: none, http: path("PUT", "/ojs/v1/admin/queues/tw-age/aging", map[string]any{"interval_ms": 60000}),
			nats: subj("queues.aging", fixed(map[string]any{"queue": "tw-age", "interval_ms": 60000})), status: 200},
		{name: "queues/aging get", prep: none, http: path("GET", "/ojs/v1/admin/queues/tw-age/aging", nil),
			nats: subj("queues.aging", fixed(map[string]any{"queue": "tw-age"})), status: 200},
		{name: "queues/aging bad", prep: none, http: path("PUT", "/ojs/v1/admin/queues/tw-age/aging", map[string]any{"interval_ms": 0}),
			nats: subj("queues.aging", fixed(map[string]any{"queue": "tw-age", "interval_ms": 0})), status: 400, code: "invalid_request", field: "interval_ms"},
		{name: "queues/aging clear", prep: none, http: path("DELETE", "/ojs/v1/admin/queues/tw-age/aging", nil),
			nats: subj("queues.clearaging", fixed(map[string]any{"queue": "tw-age"})), status: 200},
		// 12 dead letter.
		{name: "deadletter/list", prep: none, http: path("GET", "/ojs/v1/dead-letter?limit=5", nil),
			nats: subj("deadletter.list", fixed(map[string]any{"limit": 5})), status: 200},
		{name: "deadletter/retry unknown", prep: func(*fixture, string) string { return unknownID }, http: path("POST", "/ojs/v1/dead-letter/{}/retry", nil),
			nats: subj("deadletter.retry", withID(nil)), status: 404, code: "not_found"},
		{name: "deadletter/delete unknown", prep: func(*fixture, string) string { return unknownID }, http: path("DELETE", "/ojs/v1/dead-letter/{}", nil),
			nats: subj("deadletter.delete", withID(nil)), status: 404, code: "not_found"},
		// ojs-events.md 6.4.
		{name: "events", prep: none, http: path("GET", "/ojs/v1/events?types=job.completed&limit=3", nil),
			nats: subj("events.list", fixed(map[string]any{"types": "job.completed", "limit": 3})), status: 200},
		{name: "events/types array", prep: none, http: path("GET", "/ojs/v1/events?types=job.completed&types=job.failed&queues=twins", nil),
			nats: subj("events.list", fixed(map[string]any{"types": []string{"job.completed", "job.failed"}, "queues": "twins"})), status: 200},
		{name: "events/bad type in array", prep: none, http: path("GET", "/ojs/v1/events?types=job.completed&types=Bad!", nil),
			nats: subj("events.list", fixed(map[string]any{"types": []string{"job.completed", "Bad!"}})), status: 400, code: "invalid_request", field: "type"},
		{name: "events/bad limit", prep: none, http: path("GET", "/ojs/v1/events?limit=x", nil),
			nats: subj("events.list", fixed(map[string]any{"limit": "x"})), status: 400, code: "invalid_request", field: "limit"},
		{name: "events/after", prep: none, http: path("GET", "/ojs/v1/events?after=abc", nil),
			nats: subj("events.list", fixed(map[string]any{"after": "abc"})), status: 422, code: "unsupported"},
	}
}

// Issue 19 "How it is checked": each micro endpoint's success and error
// paths answer as HTTP does: same status (micro's Nats-Service-Error-Code),
// same OJS code (Nats-Service-Error and the envelope), same body shape,
// same field named and same hint.
func TestIssue19EveryEndpointAnswersAsHTTP(t *testing.T) {
	t.Parallel()
	f := setup(t, app.Config{})
	for _, tc := range twins() {
		hv, nv := tc.prep(f, "h"), tc.prep(f, "n")
		if tc.http == nil { // same body as NATS, job_id as sent
			op := ""
			tc.http = func(v string) (string, string, any) {
				o, b := tc.nats(v)
				op = o
				return "POST", "/ojs/v1/" + strings.ReplaceAll(op, ".", "/"), b
			}
		}
		m, p, hb := tc.http(hv)
		h := f.http(m, p, hb)
		op, nb := tc.nats(nv)
		n := f.nats(op, nb)
		t.Run(tc.name, func(t *testing.T) {
			if h.status != tc.status {
				t.Fatalf("HTTP %s %s: %d, want %d: %s", m, p, h.status, tc.status, h.raw)
			}
			if tc.status < 300 {
				if n.status != 200 || n.code != "" {
					t.Fatalf("NATS %s: %d %s, want success: %s", op, n.status, n.code, n.raw)
				}
				if hk, nk := shape(h.body), shape(n.body); !slices.Equal(hk, nk) {
					t.Fatalf("body shapes differ:\nHTTP %v\nNATS %v", hk, nk)
				}
				return
			}
			if n.status != tc.status || n.code != tc.code || h.code != tc.code {
				t.Fatalf("NATS %s: %d %q, HTTP %d %q, want %d %q: %s", op, n.status, n.code, h.status, h.code, tc.status, tc.code, n.raw)
			}
			he, ne := obj(h.body["error"]), obj(n.body["error"])
			if ne["code"] != tc.code {
				t.Fatalf("NATS envelope code %v, header %s", ne["code"], n.code)
			}
			if hk, nk := shape(h.body), shape(n.body); !slices.Equal(hk, nk) {
				t.Fatalf("envelope shapes differ:\nHTTP %v\nNATS %v", hk, nk)
			}
			if ne["retryable"] != he["retryable"] {
				t.Fatalf("retryable: HTTP %v NATS %v", he["retryable"], ne["retryable"])
			}
			hf, nf := obj(he["details"])["field"], obj(ne["details"])["field"]
			want := tc.field
			if hf != nil || want != "" {
				if hf != want {
					t.Fatalf("HTTP details.field %v, want %q", hf, want)
				}
				if tc.natsField != "" {
					want = tc.natsField
				}
				if nf != want {
					t.Fatalf("NATS details.field %v, want %q", nf, want)
				}
			}
			if tc.natsField == "" {
				hh := strings.ReplaceAll(fmt.Sprint(he["hint"]), hv, "X")
				nh := strings.ReplaceAll(fmt.Sprint(ne["hint"]), nv, "X")
				if hh != nh {
					t.Fatalf("hints differ:\nHTTP %s\nNATS %s", hh, nh)
				}
			}
		})
	}
}

// shape lists the keys of a body and of its object values, sorted.
func shape(m map[string]any) []string {
	var out []string
	for k, v := range m {
		out = append(out, k)
		for kk := range obj(v) {
			out = append(out, k+"."+kk)
		}
	}
	sort.Strings(out)
	return out
}
