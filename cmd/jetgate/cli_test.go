package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/jetgate/jetgate/client"
	"github.com/jetgate/jetgate/client/jetgatetest"
)

// cliEnv is a jetgate for CLI tests and the connection flags to reach it.
type cliEnv struct {
	jg   *jetgatetest.Server
	conn []string // --nats-url ... [--token ...]
}

// startCLIEnv starts jetgate (with its NATS binding) with the kit.
func startCLIEnv(t *testing.T, opts ...jetgatetest.Option) *cliEnv {
	t.Helper()
	jg := jetgatetest.Start(t, opts...)
	return &cliEnv{jg: jg, conn: []string{"--nats-url", jg.NatsURL}}
}

// cli runs a command with the env's connection flags after the command's
// own arguments.
func (e *cliEnv) cli(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	return runCmd(t, append(args, e.conn...)...)
}

// must runs a command that must succeed and returns its stdout.
func (e *cliEnv) must(t *testing.T, args ...string) string {
	t.Helper()
	out, errOut, err := e.cli(t, args...)
	if err != nil {
		t.Fatalf("jetgate %s: %v\n%s%s", strings.Join(args, " "), err, out, errOut)
	}
	return out
}

// mustJSON runs a command with --json and decodes its output.
func (e *cliEnv) mustJSON(t *testing.T, args ...string) map[string]any {
	t.Helper()
	out := e.must(t, append(args, "--json")...)
	var m map[string]any
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		t.Fatalf("jetgate %s --json: not a JSON object: %v\n%s", strings.Join(args, " "), err, out)
	}
	return m
}

// wantAPIError checks err is jetgate's OJS error with this status and
// code, printed as "<code>: <message>".
func wantAPIError(t *testing.T, err error, status, code string) *apiError {
	t.Helper()
	var ae *apiError
	if !errors.As(err, &ae) || ae.Status != status || ae.Code != code || !strings.HasPrefix(err.Error(), code+": ") || ae.Message == "" {
		t.Fatalf("err = %#v (%v), want %s %s with a message", ae, err, status, code)
	}
	return ae
}

func obj(v any) map[string]any { m, _ := v.(map[string]any); return m }

// field returns the value of a NAME  value line of a fields table.
func field(out, name string) string {
	for _, line := range strings.Split(out, "\n") {
		if k, v, ok := strings.Cut(line, " "); ok && k == name {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// Issue 19 CLI: enqueue, jobs get, jobs patch and jobs cancel over the
// NATS binding, as tables and as the API's JSON; errors are the OJS
// envelope's code and message (404 unknown job, 409 cancelling a
// cancelled job, 400 naming the field of a bad enqueue).
func TestCLIJobs(t *testing.T) {
	t.Parallel()
	e := startCLIEnv(t)
	out := e.must(t, "enqueue", "email.send", `["a@example.com"]`, "--queue", "mail", "--priority", "5")
	id := field(out, "ID")
	if id == "" || field(out, "TYPE") != "email.send" || field(out, "QUEUE") != "mail" || field(out, "STATE") != "available" || field(out, "PRIORITY") != "5" {
		t.Fatalf("enqueue table:\n%s", out)
	}
	got := e.mustJSON(t, "jobs", "get", id)
	job, _ := got["job"].(map[string]any)
	if job["id"] != id || job["args"].([]any)[0] != "a@example.com" || job["priority"] != float64(5) {
		t.Fatalf("jobs get --json: %v", got)
	}
	out = e.must(t, "jobs", "get", id)
	if field(out, "ID") != id || field(out, "STATE") != "available" || field(out, "ARGS") != `["a@example.com"]` {
		t.Fatalf("jobs get table:\n%s", out)
	}

	out = e.must(t, "jobs", "patch", id, "--priority", "1")
	if field(out, "ID") != id || field(out, "PRIORITY") != "1" {
		t.Fatalf("jobs patch table:\n%s", out)
	}
	if p := e.mustJSON(t, "jobs", "get", id)["job"].(map[string]any)["priority"]; p != float64(1) {
		t.Fatalf("priority after patch: %v", p)
	}
	_, _, err := e.cli(t, "jobs", "patch", id, "--priority", "1000")
	wantAPIError(t, err, "400", "invalid_request")

	out = e.must(t, "jobs", "cancel", id)
	if field(out, "STATE") != "cancelled" || field(out, "PREVIOUS_STATE") != "available" {
		t.Fatalf("jobs cancel table:\n%s", out)
	}
	_, _, err = e.cli(t, "jobs", "cancel", id)
	wantAPIError(t, err, "409", "conflict")
	_, _, err = e.cli(t, "jobs", "get", "01a20000-0000-7000-8000-000000000000")
	wantAPIError(t, err, "404", "not_found")

	// enqueue --json is the API's {"job":...}; a bad type is 400 naming it.
	j := e.mustJSON(t, "enqueue", "report.build", "--max-attempts", "2", "--meta", `{"tenant":"acme"}`)
	jj, _ := j["job"].(map[string]any)
	if jj["type"] != "report.build" || jj["queue"] != "default" || jj["max_attempts"] != float64(2) || obj(jj["meta"])["tenant"] != "acme" {
		t.Fatalf("enqueue --json: %v", j)
	}
	// PATCH of timeouts (--set) answers the job; the table shows it.
	out = e.must(t, "jobs", "patch", jj["id"].(string), "--set", `{"timeout":60}`)
	if field(out, "ID") != jj["id"] || field(out, "STATE") != "available" {
		t.Fatalf("jobs patch --set table:\n%s", out)
	}
	if to := e.mustJSON(t, "jobs", "get", jj["id"].(string))["job"].(map[string]any)["timeout"]; to != float64(60) {
		t.Fatalf("timeout after patch --set: %v", to)
	}
	_, _, err = e.cli(t, "enqueue", "Bad.Type")
	if ae := wantAPIError(t, err, "400", "invalid_payload"); ae.Details["field"] != "type" || !strings.Contains(ae.Message, "type") {
		t.Fatalf("bad type error does not name the field: %+v", ae)
	}
}

// enqueue --file takes the whole envelope (here from stdin-less file);
// ARGS that are not a JSON array are refused before any request.
func TestCLIEnqueueFile(t *testing.T) {
	t.Parallel()
	e := startCLIEnv(t)
	f := t.TempDir() + "/job.json"
	if err := os.WriteFile(f, []byte(`{"type":"img.resize","args":[1,2],"options":{"queue":"media"}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	out := e.must(t, "enqueue", "--file", f, "--priority", "3")
	if field(out, "TYPE") != "img.resize" || field(out, "QUEUE") != "media" || field(out, "PRIORITY") != "3" {
		t.Fatalf("enqueue --file:\n%s", out)
	}
	if _, _, err := e.cli(t, "enqueue", "x.y", `{"not":"an array"}`); err == nil || !strings.Contains(err.Error(), "JSON array") {
		t.Fatalf("err = %v", err)
	}
}

// Issue 31 item 5: enqueue --max-attempts 0 sends max_attempts 0, which
// the server honours (ojs-retry.md 2.2: the first failure is final),
// instead of dropping it as unset; without the flag nothing is sent and the
// server's default (3) holds. Over --file, the flag changes only
// max_attempts of the envelope's retry policy. A value the server refuses
// (a negative priority or max_attempts) reaches it and gets its 400.
func TestCLIEnqueueMaxAttemptsZero(t *testing.T) {
	t.Parallel()
	e := startCLIEnv(t)
	job := func(args ...string) map[string]any {
		t.Helper()
		return obj(e.mustJSON(t, args...)["job"])
	}
	if j := job("enqueue", "attempts.zero", "--max-attempts", "0"); j["max_attempts"] != float64(0) {
		t.Fatalf("--max-attempts 0: max_attempts %v, want 0", j["max_attempts"])
	}
	if j := job("enqueue", "attempts.zero", "--max-attempts=0", "--priority", "0"); j["max_attempts"] != float64(0) || j["priority"] != float64(0) {
		t.Fatalf("--max-attempts=0 --priority 0: max_attempts %v priority %v, want 0 and 0", j["max_attempts"], j["priority"])
	}
	if j := job("enqueue", "attempts.zero"); j["max_attempts"] != float64(3) || j["priority"] != float64(2) {
		t.Fatalf("no flag: max_attempts %v priority %v, want the defaults 3 and 2", j["max_attempts"], j["priority"])
	}
	f := t.TempDir() + "/job.json"
	if err := os.WriteFile(f, []byte(`{"type":"attempts.file","args":[],"options":{"retry":{"max_attempts":5,"backoff_type":"none"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	j := job("enqueue", "--file", f, "--max-attempts", "0")
	if r := obj(j["retry"]); j["max_attempts"] != float64(0) || r["max_attempts"] != float64(0) || r["backoff_type"] != "none" {
		t.Fatalf("--file with --max-attempts 0: max_attempts %v retry %v, want 0 and backoff_type none kept", j["max_attempts"], j["retry"])
	}
	if j := job("enqueue", "--file", f); j["max_attempts"] != float64(5) {
		t.Fatalf("--file alone: max_attempts %v, want the file's 5", j["max_attempts"])
	}
	// A retry policy out of range is 422 (issue 32), naming the field.
	_, _, err := e.cli(t, "enqueue", "attempts.zero", "--max-attempts", "-1")
	if ae := wantAPIError(t, err, "422", "invalid_payload"); !strings.Contains(fmt.Sprint(ae.Details["field"]), "max_attempts") {
		t.Fatalf("--max-attempts -1: %+v, want the field named", ae)
	}
	_, _, err = e.cli(t, "enqueue", "attempts.zero", "--priority", "-1")
	if ae := wantAPIError(t, err, "400", "invalid_payload"); !strings.Contains(fmt.Sprint(ae.Details["field"]), "priority") {
		t.Fatalf("--priority -1: %+v, want the field named", ae)
	}
	if _, _, err := e.cli(t, "enqueue", "attempts.zero", "--max-attempts", "many"); err == nil || !strings.Contains(err.Error(), "-max-attempts") {
		t.Fatalf("--max-attempts many: %v", err)
	}

	// The body itself: no flag, no options; 0 given, 0 sent.
	body, err := jobEnvelope([]string{"x.y"}, "", "", "", nil, nil, nil)
	if err != nil || body["options"] != nil {
		t.Fatalf("no flags: options %v, %v; want none sent", body["options"], err)
	}
	zero := 0
	body, err = jobEnvelope([]string{"x.y"}, "", "", "", nil, &zero, nil)
	if b, _ := json.Marshal(body); err != nil || !strings.Contains(string(b), `"options":{"retry":{"max_attempts":0}}`) {
		t.Fatalf("--max-attempts 0: body %s, %v", b, err)
	}
}

// Issue 19 CLI: queues ls, stats, pause and resume (ojs-core queue
// operations, ADM-002), tables and JSON; an unknown queue's stats is 404.
func TestCLIQueues(t *testing.T) {
	t.Parallel()
	e := startCLIEnv(t)
	e.must(t, "enqueue", "a.b", "--queue", "alpha")
	e.must(t, "enqueue", "a.b", "--queue", "alpha")
	e.must(t, "enqueue", "a.b", "--queue", "beta")

	out := e.must(t, "queues", "pause", "beta")
	if !hasRow(out, "beta", "paused", "true") {
		t.Fatalf("queues pause:\n%s", out)
	}
	out = e.must(t, "queues", "ls")
	if !hasRow(out, "alpha", "active") || !hasRow(out, "beta", "paused") || !strings.HasPrefix(out, "NAME") {
		t.Fatalf("queues ls:\n%s", out)
	}
	ls := e.mustJSON(t, "queues", "ls")
	if qs, _ := ls["queues"].([]any); len(qs) != 2 {
		t.Fatalf("queues ls --json: %v", ls)
	}
	out = e.must(t, "queues", "resume", "beta")
	if !hasRow(out, "beta", "active", "false") {
		t.Fatalf("queues resume:\n%s", out)
	}

	out = e.must(t, "queues", "stats", "alpha")
	if field(out, "QUEUE") != "alpha" || field(out, "available") != "2" || field(out, "active") != "0" {
		t.Fatalf("queues stats:\n%s", out)
	}
	st := e.mustJSON(t, "queues", "stats", "alpha")
	if s, _ := st["stats"].(map[string]any); s["available"] != float64(2) {
		t.Fatalf("queues stats --json: %v", st)
	}
	_, _, err := e.cli(t, "queues", "stats", "nosuchqueue")
	wantAPIError(t, err, "404", "not_found")
}

// Issue 19 CLI: limits ls, get and set (RL-005, 10.3, RL-R004); an
// override shows in get; a key breaking the pattern is 400.
func TestCLILimits(t *testing.T) {
	t.Parallel()
	e := startCLIEnv(t)
	f := t.TempDir() + "/job.json"
	job := `{"type":"smtp.send","args":[],"rate_limit":{"key":"smtp:acme","concurrency":5}}`
	if err := os.WriteFile(f, []byte(job), 0o600); err != nil {
		t.Fatal(err)
	}
	e.must(t, "enqueue", "--file", f)

	out := e.must(t, "limits", "ls")
	if !hasRow(out, "smtp:acme", "key", "0/5") {
		t.Fatalf("limits ls:\n%s", out)
	}
	out = e.must(t, "limits", "set", "smtp:acme", "--concurrency", "2", "--rate", "100/1m", "--expires-in", "1h")
	if field(out, "KEY") != "smtp:acme" || field(out, "CONCURRENCY") != "0/2" || !strings.HasPrefix(field(out, "RATE"), "0/100 per PT1M") || !strings.HasPrefix(field(out, "OVERRIDE"), "until ") {
		t.Fatalf("limits set:\n%s", out)
	}
	got := e.mustJSON(t, "limits", "get", "smtp:acme")
	if c, _ := got["concurrency"].(map[string]any); c["limit"] != float64(2) || got["override"] == nil {
		t.Fatalf("limits get --json: %v", got)
	}
	_, _, err := e.cli(t, "limits", "get", "bad key")
	wantAPIError(t, err, "400", "invalid_request")
	if _, _, err := e.cli(t, "limits", "set", "smtp:acme"); err == nil || !strings.Contains(err.Error(), "nothing to set") {
		t.Fatalf("limits set without limits: %v", err)
	}
}

// With access control on, the embedded NATS server refuses a CLI without
// its nkey seed, with a hint naming --nats-nkey (issue 31 item 8); with
// it, a request without the bearer token is 401 and with it succeeds (the
// NATS binding checks the same role table as HTTP); a wrong API prefix
// names the subject nothing answers on.
func TestCLITokenAndPrefix(t *testing.T) {
	t.Parallel()
	e := startCLIEnv(t, jetgatetest.WithToken("s3cret"))
	_, _, err := e.cli(t, "queues", "ls")
	if err == nil || !strings.Contains(err.Error(), "--nats-nkey") {
		t.Fatalf("without the nkey seed: %v, want a refusal naming --nats-nkey", err)
	}
	e.conn = append(e.conn, "--nats-nkey", e.jg.NatsSeedFile)
	_, _, err = e.cli(t, "queues", "ls")
	wantAPIError(t, err, "401", "unauthorized")
	e.conn = append(e.conn, "--token", "s3cret")
	e.must(t, "queues", "ls")
	_, _, err = e.cli(t, "queues", "ls", "--nats-api-prefix", "acme.ojs")
	if err == nil || !strings.Contains(err.Error(), "nothing answers on acme.ojs.queues.list") {
		t.Fatalf("wrong prefix: %v", err)
	}
}

// jobs ls reads the admin job listing (ADM-003) over NATS: table, JSON,
// filters, and a bad state is 400.
func TestCLIJobsLs(t *testing.T) {
	t.Parallel()
	e := startCLIEnv(t)
	jg := e.jg
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var ids []string
	for _, q := range []string{"mail", "mail", "other"} {
		j, err := jg.HTTPClient.Enqueue(ctx, "email.send", nil, client.Queue(q))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, j.ID)
	}
	out, _, err := e.cli(t, "jobs", "ls", "--queue", "mail")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out, "ID") || !hasRow(out, ids[0], "email.send", "mail", "available") || !hasRow(out, ids[1], "email.send", "mail") || strings.Contains(out, ids[2]) {
		t.Fatalf("jobs ls --queue mail:\n%s", out)
	}
	out, _, err = e.cli(t, "jobs", "ls", "--json")
	var r struct {
		Items []map[string]any `json:"items"`
	}
	if err != nil || json.Unmarshal([]byte(out), &r) != nil || len(r.Items) != 3 {
		t.Fatalf("jobs ls --json: %v\n%s", err, out)
	}
	_, _, err = e.cli(t, "jobs", "ls", "--state", "bogus")
	wantAPIError(t, err, "400", "invalid_request")
}

// Usage errors name the command; --help shows the connection flags.
func TestCLIUsage(t *testing.T) {
	t.Parallel()
	// Each is refused before any connection is tried (the URL goes nowhere).
	for _, args := range [][]string{{"jobs"}, {"jobs", "nope"}, {"jobs", "get"}, {"queues", "stats", "a", "b"},
		{"limits", "set", "k", "--rate", "x"}, {"limits", "set", "k"}, {"jobs", "patch", "id"}, {"enqueue"},
		{"enqueue", "a.b", "{}"}, {"enqueue", "a.b", "--file", "x.json"}, {"jobs", "get", "id", "--bogus"}} {
		_, _, err := runCmd(t, append(args, "--nats-url", "nats://127.0.0.1:1", "--timeout", "100ms")...)
		if err == nil || strings.Contains(err.Error(), "connect to NATS") {
			t.Errorf("%v: err = %v, want a usage error", args, err)
		}
	}
	out, _, err := runCmd(t, "jobs", "get", "--help")
	if err != nil || !strings.Contains(out, "--nats-url") || !strings.Contains(out, "JETGATE_TOKEN") || !strings.Contains(out, "--nats-api-prefix") {
		t.Fatalf("jobs get --help: %v\n%s", err, out)
	}
}

// The binary exits non-zero and prints "jetgate: <code>: <message>" for
// an error answer (issue 19: errors as the envelope's code and message).
func TestCLIExitCode(t *testing.T) {
	t.Parallel()
	jg := jetgatetest.Start(t)
	cmd := exec.Command(os.Args[0], "-test.run=^TestMainProcess$")
	cmd.Env = append(os.Environ(), "JETGATE_TEST_MAIN=jobs ls --state bogus --nats-url "+jg.NatsURL)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("exit: %v, want status 1; stderr %s", err, stderr.String())
	}
	if !strings.HasPrefix(stderr.String(), "jetgate: invalid_request: ") || !strings.Contains(stderr.String(), "state") {
		t.Fatalf("stderr = %q", stderr.String())
	}
}

// TestMainProcess runs main with the arguments in JETGATE_TEST_MAIN when
// TestCLIExitCode starts this test binary as the jetgate command.
func TestMainProcess(t *testing.T) {
	args := os.Getenv("JETGATE_TEST_MAIN")
	if args == "" {
		t.Skip("run by TestCLIExitCode")
	}
	os.Args = append([]string{"jetgate"}, strings.Fields(args)...)
	main()
}
