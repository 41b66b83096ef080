package natsbind_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/micro"

	"github.com/jetgate/jetgate/admission/authz"
	"github.com/jetgate/jetgate/cmd/jetgate/app"
	"github.com/jetgate/jetgate/httpbind"
)

// contract lists the subjects of NATSBIND.md's table that every jetgate
// must serve (issue 19: "every operation of the HTTP binding").
var contract = []string{
	"jobs.enqueue", "jobs.batch", "jobs.get", "jobs.cancel", "jobs.patch",
	"workers.fetch", "workers.ack", "workers.nack", "workers.ackbatch", "workers.nackbatch",
	"workers.heartbeat", "workers.progress",
	"queues.list", "queues.stats", "queues.pause", "queues.resume", "queues.config",
	"ratelimits.list", "ratelimits.get", "ratelimits.override", "ratelimits.clear",
	"deadletter.list", "deadletter.retry", "deadletter.delete", "events.list",
}

func (f *fixture) discover(verb micro.Verb, v any) {
	f.t.Helper()
	subj, err := micro.ControlSubject(verb, "ojs", "")
	if err != nil {
		f.t.Fatal(err)
	}
	res, err := f.nc.Request(subj, nil, 5*time.Second)
	if err != nil {
		f.t.Fatalf("%s: %v", subj, err)
	}
	if err := json.Unmarshal(res.Data, v); err != nil {
		f.t.Fatalf("%s: %v: %s", subj, err, res.Data)
	}
}

// Issue 19: `nats micro info ojs` ($SRV.INFO.ojs) shows the service "ojs"
// with jetgate's version and every endpoint of the contract, each with the
// HTTP route it mirrors and its operation class in the role table; the
// classes are the HTTP routes' (one role table, admission/authz).
func TestIssue19DiscoveryShowsEveryEndpoint(t *testing.T) {
	t.Parallel()
	f := setup(t, app.Config{})
	var info micro.Info
	f.discover(micro.InfoVerb, &info)
	if info.Name != "ojs" || info.Version != app.Version {
		t.Fatalf("service %q version %q, want ojs %s", info.Name, info.Version, app.Version)
	}
	var subjects []string
	for _, e := range info.Endpoints {
		subjects = append(subjects, e.Subject)
		if e.QueueGroup != "jetgate" {
			t.Errorf("%s: queue group %q, want jetgate (processes share requests)", e.Subject, e.QueueGroup)
		}
		op := e.Metadata["operation"]
		route := e.Metadata["http"]
		if route == "" {
			if !strings.HasSuffix(e.Subject, "batch") || op != authz.OpWork.String() {
				t.Errorf("%s: no HTTP route; only the batch worker calls are NATS only (op %s)", e.Subject, op)
			}
			continue
		}
		method, path, _ := strings.Cut(route, " ")
		for _, m := range strings.Split(method, "|") {
			if want := httpbind.RouteOp(m, path).String(); op != want {
				t.Errorf("%s: operation %s, but %s %s is %s over HTTP", e.Subject, op, m, path, want)
			}
		}
	}
	if !slices.Equal(subjects, f.srv.NatsAPI().Subjects()) {
		t.Errorf("INFO subjects %v\nwant %v", subjects, f.srv.NatsAPI().Subjects())
	}
	for _, c := range contract {
		if !slices.Contains(subjects, "ojs.v1."+c) {
			t.Errorf("INFO lacks ojs.v1.%s", c)
		}
	}

	// `nats micro stats ojs`: every endpoint, and its requests counted,
	// error replies as errors (issue 31: micro's num_errors stayed 0 after
	// 400 and 404 replies), in micro's numbers and in the data.
	f.nats("jobs.get", map[string]any{"id": unknownID})
	f.nats("jobs.get", map[string]any{"id": 5})
	f.nats("health", map[string]any{})
	var stats micro.Stats
	f.discover(micro.StatsVerb, &stats)
	if len(stats.Endpoints) != len(subjects) {
		t.Fatalf("STATS shows %d endpoints, INFO %d", len(stats.Endpoints), len(subjects))
	}
	if stats.Name != "ojs" || stats.Type != micro.StatsResponseType || stats.Started.IsZero() {
		t.Fatalf("STATS %+v", stats.ServiceIdentity)
	}
	seen := 0
	for _, e := range stats.Endpoints {
		var d struct {
			Requests  int    `json:"requests"`
			Errors    int    `json:"errors"`
			LastError string `json:"last_error"`
		}
		switch e.Subject {
		case "ojs.v1.jobs.get":
			seen++
			if e.NumRequests != 2 || e.NumErrors != 2 || e.LastError != "400:invalid_request" || e.ProcessingTime <= 0 ||
				e.AverageProcessingTime != e.ProcessingTime/2 {
				t.Errorf("jobs.get stats %+v, want 2 requests, 2 errors, the last 400:invalid_request", e)
			}
			if err := json.Unmarshal(e.Data, &d); err != nil || d.Requests != 2 || d.Errors != 2 || d.LastError != "invalid_request" {
				t.Errorf("jobs.get stats data %s (%v), want 2 requests, 2 errors, invalid_request", e.Data, err)
			}
		case "ojs.v1.health":
			seen++
			if e.NumRequests != 1 || e.NumErrors != 0 || e.LastError != "" {
				t.Errorf("health stats %+v, want 1 request, no error", e)
			}
		}
	}
	if seen != 2 {
		t.Fatal("STATS lacks ojs.v1.jobs.get or ojs.v1.health")
	}
	// PING answers with the same identity.
	var ping micro.Ping
	f.discover(micro.PingVerb, &ping)
	if ping.Name != "ojs" || ping.ID != stats.ID || ping.Type != micro.PingResponseType || ping.Version != app.Version {
		t.Errorf("PING %+v, STATS id %s", ping, stats.ID)
	}
}

// Issue 19: a deployment prefix replaces ojs.v1 in every subject.
func TestIssue19Prefix(t *testing.T) {
	t.Parallel()
	f := setup(t, app.Config{NatsAPIPrefix: "acme.jobs"})
	res, err := f.nc.Request("acme.jobs.health", nil, 5*time.Second)
	if err != nil || res.Header.Get(micro.ErrorCodeHeader) != "" {
		t.Fatalf("acme.jobs.health: %v %v", err, res)
	}
	for _, s := range f.srv.NatsAPI().Subjects() {
		if !strings.HasPrefix(s, "acme.jobs.") {
			t.Fatalf("subject %s outside the prefix", s)
		}
	}
}

// --nats-api=false: no service, the subjects answer nothing.
func TestIssue19NatsAPIOff(t *testing.T) {
	t.Parallel()
	f := setup(t, app.Config{NoNatsAPI: true})
	if f.srv.NatsAPI() != nil {
		t.Fatal("NATS API started though turned off")
	}
	if _, err := f.nc.Request("ojs.v1.health", nil, 200*time.Millisecond); err == nil {
		t.Fatal("ojs.v1.health answered with the NATS API off")
	}
}

// notOnNATS are the HTTP routes the NATS binding leaves out, each with its
// reason; every other route must have an endpoint (issue 19: "every
// operation of the HTTP binding").
var notOnNATS = map[string]string{
	"GET /health":                               "process probe for load balancers",
	"GET /ready":                                "process probe for load balancers",
	"GET /ojs/manifest":                         "describes the HTTP binding (paths, media type)",
	"GET /metrics":                              "Prometheus scrape endpoint",
	"GET /ojs/v1/jobs/{id}/progress/stream":     "server-sent events; over NATS subscribe to the job's events",
	"GET /ojs/v1/admin/queues/{name}/config":    "alias of queues.config",
	"PUT /ojs/v1/admin/queues/{name}/config":    "alias of queues.config",
	"POST /ojs/v1/admin/queues/{name}/pause":    "alias of queues.pause",
	"POST /ojs/v1/admin/queues/{name}/resume":   "alias of queues.resume",
	"POST /ojs/v1/admin/jobs/{id}/cancel":       "alias of jobs.cancel",
	"POST /ojs/v1/admin/jobs/{id}/retry":        "alias of deadletter.retry",
	"POST /ojs/v1/admin/dead-letter/{id}/retry": "alias of deadletter.retry",
	"DELETE /ojs/v1/admin/dead-letter/{id}":     "alias of deadletter.delete",
	"GET /ojs/v1/admin/dead-letter/stats":       "alias of deadletter.stats",
	// Issue 32: the admin UI's plural cron paths.
	"GET /ojs/v1/crons":           "alias of cron.list",
	"POST /ojs/v1/crons":          "alias of cron.register",
	"GET /ojs/v1/crons/{name}":    "alias of cron.get",
	"PUT /ojs/v1/crons/{name}":    "alias of cron.put",
	"DELETE /ojs/v1/crons/{name}": "alias of cron.delete",
}

// Issue 19: every route of the HTTP binding has a NATS endpoint, or is
// listed above with why not.
func TestIssue19EveryHTTPOperationOnNATS(t *testing.T) {
	t.Parallel()
	f := setup(t, app.Config{})
	var info micro.Info
	f.discover(micro.InfoVerb, &info)
	served := map[string]bool{}
	for _, e := range info.Endpoints {
		method, path, _ := strings.Cut(e.Metadata["http"], " ")
		for _, m := range strings.Split(method, "|") {
			served[m+" "+path] = true
		}
	}
	for _, r := range httpbind.Routes() {
		if served[r] == (notOnNATS[r] != "") {
			t.Errorf("%s: served over NATS %v, listed as not served %q", r, served[r], notOnNATS[r])
		}
	}
}
