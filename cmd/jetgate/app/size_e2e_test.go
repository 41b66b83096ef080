package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"

	"github.com/jetgate/jetgate/admission/ojs"
	"github.com/jetgate/jetgate/cmd/jetgate/app"
	"github.com/jetgate/jetgate/jetstream/natstest"
	"github.com/jetgate/jetgate/jetstream/topology"
)

// sizeFixture is one jetgate with a NATS connection of its own, to send
// NATS API requests and count what is stored.
type sizeFixture struct {
	t      *testing.T
	c      client
	nc     *nats.Conn
	js     jetstream.JetStream
	limits ojs.PayloadLimits
}

func setupSize(t *testing.T) sizeFixture { return setupSizeWith(t, app.Config{}) }

// setupSizeWith starts jetgate on the embedded server with cfg, whose
// max_payload is 2 MiB (issue 31: a 1 MiB envelope, ojs-json-format.md
// 8.1, fits the record budget). A config that raises --max-body-bytes to
// 2 MiB reaches the record budget's job limit (1920 KiB) over HTTP.
func setupSizeWith(t *testing.T, cfg app.Config) sizeFixture {
	t.Helper()
	s := startApp(t, cfg)
	nc, js := connectApp(t, s)
	l := s.Service().PayloadLimits()
	if l.MaxPayload != 2<<20 || l.Job != 1920<<10 || l.Result != 32<<10 || l.Error != 16<<10 {
		t.Fatalf("record budget %+v on the embedded server, want max_payload 2 MiB", l)
	}
	return sizeFixture{t: t, c: client{t: t, base: s.URL()}, nc: nc, js: js, limits: l}
}

// stored counts the messages of the streams a job is written to.
func (f sizeFixture) stored() map[string]uint64 {
	f.t.Helper()
	out := map[string]uint64{}
	for _, name := range []string{topology.ReadyStream, "KV_" + topology.JobsBucket, topology.TimerStream} {
		st, err := f.js.Stream(context.Background(), name)
		if err != nil {
			f.t.Fatal(err)
		}
		info, err := st.Info(context.Background())
		if err != nil {
			f.t.Fatal(err)
		}
		out[name] = info.State.Msgs
	}
	return out
}

// natsReq sends body to the NATS API subject and returns the status
// (Nats-Service-Error-Code, "" on success) and the decoded reply.
func (f sizeFixture) natsReq(subject string, body []byte) (string, map[string]any) {
	f.t.Helper()
	res, err := f.nc.Request("ojs.v1."+subject, body, 30*time.Second)
	if err != nil {
		f.t.Fatalf("%s: %v", subject, err)
	}
	var out map[string]any
	_ = json.Unmarshal(res.Data, &out)
	return res.Header.Get(micro.ErrorCodeHeader), out
}

// want413 checks an OJS error envelope: 413 payload_too_large, not
// retryable, naming limit, a size over it and field.
func want413(t *testing.T, what string, env map[string]any, field string, limit int64) {
	t.Helper()
	e := obj(env["error"])
	d := obj(e["details"])
	size, _ := d["size_bytes"].(float64)
	if e["code"] != ojs.CodePayloadTooLarge || e["retryable"] != false || d["limit_bytes"] != float64(limit) ||
		int64(size) <= limit || (field != "" && d["field"] != field) || e["hint"] == "" {
		t.Fatalf("%s: %v, want 413 payload_too_large naming %q, limit %d and the size", what, env, field, limit)
	}
}

func bigArgs(n int) []any { return []any{strings.Repeat("x", n)} }

// Issue 31 item 3: a job under the HTTP limit (raised to 2 MiB here) but
// over the job limit of the record budget (max_payload less the reserve,
// 1920 KiB on the embedded server) is
// 413 naming both sizes, over HTTP and NATS, single and batch, before
// anything is written: not its ready message, not its record, not the
// expire timer a deadline would arm first.
func TestIssue31JobOverTheBudgetIs413BeforeAnyWrite(t *testing.T) {
	t.Parallel()
	f := setupSizeWith(t, app.Config{MaxBodyBytes: 2 << 20})
	before := f.stored()
	job := map[string]any{"type": "big.job", "args": bigArgs(int(f.limits.Job) + 10_000), "expires_at": "+PT1H",
		"options": map[string]any{"queue": "big"}}
	r := f.c.do("POST", "/ojs/v1/jobs", job)
	if r.status != 413 {
		t.Fatalf("enqueue: %d %.300s, want 413", r.status, r.raw)
	}
	want413(t, "HTTP enqueue", r.body, "", f.limits.Job)

	small := map[string]any{"type": "small.job", "args": []any{1}, "options": map[string]any{"queue": "big"}}
	r = f.c.do("POST", "/ojs/v1/jobs/batch", map[string]any{"jobs": []any{small, job}})
	if r.status != 413 {
		t.Fatalf("batch: %d %.300s, want 413", r.status, r.raw)
	}
	want413(t, "HTTP batch", r.body, "jobs[1]", f.limits.Job)

	b, _ := json.Marshal(job)
	status, env := f.natsReq("jobs.enqueue", b)
	if status != "413" {
		t.Fatalf("NATS enqueue: %s %v", status, env)
	}
	want413(t, "NATS enqueue", env, "", f.limits.Job)
	b, _ = json.Marshal(map[string]any{"jobs": []any{small, job}})
	status, env = f.natsReq("jobs.batch", b)
	if status != "413" {
		t.Fatalf("NATS batch: %s %v", status, env)
	}
	want413(t, "NATS batch", env, "jobs[1]", f.limits.Job)

	// Over the HTTP body limit (capped at max_payload): 413 naming the
	// limit and the body's size.
	r = f.c.do("POST", "/ojs/v1/jobs", map[string]any{"type": "big.job", "args": bigArgs(2_100_000)})
	if r.status != 413 {
		t.Fatalf("enqueue over the body limit: %d %.300s", r.status, r.raw)
	}
	want413(t, "HTTP body", r.body, "", 2<<20)
	if after := f.stored(); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("refused enqueues wrote: %v, before %v", after, before)
	}
	// A job of the job limit is stored.
	f.c.must(201, "POST", "/ojs/v1/jobs", map[string]any{"type": "big.job", "args": bigArgs(int(f.limits.Job) - 1024),
		"options": map[string]any{"queue": "big"}})
}

// Issue 31 item 3: a job at the job limit can still complete with its
// result and fail with its errors: an ack with a 5 KB result and nacks
// with 3 KB messages land (they used to be 500, retryable forever);
// results, errors and progress over their part of the reserve are 413
// naming the part, with the job left as it was; repeated failures keep a
// bounded errors history. (--max-body-bytes 2 MiB, to send a job of the
// job limit.)
func TestIssue31LargeJobLandsItsResultErrorsAndProgress(t *testing.T) {
	t.Parallel()
	f := setupSizeWith(t, app.Config{MaxBodyBytes: 2 << 20})
	job := map[string]any{"type": "big.job", "args": bigArgs(int(f.limits.Job) - 2048),
		"retry":   map[string]any{"max_attempts": 100, "initial_interval": "PT0.001S", "backoff_type": "none", "jitter": false},
		"options": map[string]any{"queue": "big-life"}}
	id := obj(f.c.must(201, "POST", "/ojs/v1/jobs", job)["job"])["id"].(string)
	nack := func(msg string) resp {
		return f.c.do("POST", "/ojs/v1/workers/nack", map[string]any{"job_id": id,
			"error": map[string]any{"code": "boom", "message": msg, "retryable": true}})
	}
	state := func() map[string]any { return obj(f.c.must(200, "GET", "/ojs/v1/jobs/"+id, nil)["job"]) }

	// More errors of 3 KB than the history's 32 KiB holds.
	rounds := int(f.limits.Errors/3000) + 2
	for i := 1; i <= rounds; i++ {
		waitFetch(f.c, 30*time.Second, "big-life")
		if i == 1 {
			// Over their parts: 413 naming them, the job still active. A
			// result may take the room the record has left (at least its
			// part of the reserve): 200 KiB is more than this job leaves.
			r := f.c.do("POST", "/ojs/v1/workers/ack", map[string]any{"job_id": id,
				"result": map[string]any{"r": strings.Repeat("r", 200<<10)}})
			d := obj(obj(r.body["error"])["details"])
			room, _ := d["limit_bytes"].(float64)
			if r.status != 413 || d["field"] != "result" || int64(room) < f.limits.Result || room > 200<<10 {
				t.Fatalf("ack with a 200 KiB result: %d %.300s, want 413 naming the room left", r.status, r.raw)
			}
			want413(t, "ack", r.body, "result", int64(room))
			want413(t, "nack", nack(strings.Repeat("e", int(f.limits.Error))).body, "error", f.limits.Error)
			// Each part within its own limit (16 KiB, 16 KiB, 4 KiB), over
			// the 32 KiB they may take together.
			r = f.c.do("PUT", "/ojs/v1/jobs/"+id+"/progress", map[string]any{"progress": 0.5, "message": strings.Repeat("m", 4000),
				"data": map[string]any{"d": strings.Repeat("p", 16000)}, "checkpoint": map[string]any{"c": strings.Repeat("c", 16000)}})
			want413(t, "progress", r.body, "progress", f.limits.Progress)
			r = f.c.do("PUT", "/ojs/v1/jobs/"+id+"/progress", map[string]any{"data": map[string]any{"d": strings.Repeat("p", ojs.MaxProgressDataBytes)}})
			want413(t, "progress data", r.body, "data", ojs.MaxProgressDataBytes)
			if st := state(); st["state"] != "active" || st["result"] != nil || st["errors"] != nil || st["progress_data"] != nil {
				t.Fatalf("after refused ack, nack and progress: %v", st)
			}
			// Within: progress lands.
			f.c.must(200, "PUT", "/ojs/v1/jobs/"+id+"/progress", map[string]any{"progress": 0.5,
				"data": map[string]any{"d": strings.Repeat("p", 4000)}, "checkpoint": map[string]any{"c": strings.Repeat("c", 4000)}})
		}
		if r := nack(fmt.Sprintf("attempt %d: %s", i, strings.Repeat("e", 3000))); r.status != 200 || r.body["state"] != "retryable" {
			t.Fatalf("nack %d with a 3 KB message: %d %.300s", i, r.status, r.raw)
		}
		errs := list(state()["errors"])
		b, _ := json.Marshal(errs)
		if int64(len(b)) > f.limits.Errors || len(errs) == 0 {
			t.Fatalf("after %d nacks the errors history is %d bytes (%d entries), over %d", i, len(b), len(errs), f.limits.Errors)
		}
		if newest := obj(errs[len(errs)-1]); newest["attempt"] != float64(i) {
			t.Fatalf("after %d nacks the newest error is %v", i, newest)
		}
	}
	if n := len(list(state()["errors"])); n >= rounds {
		t.Fatalf("%d errors kept after %d nacks of 3 KB: the history is not bounded", n, rounds)
	}
	waitFetch(f.c, 30*time.Second, "big-life")
	r := f.c.do("POST", "/ojs/v1/workers/ack", map[string]any{"job_id": id, "result": map[string]any{"r": strings.Repeat("r", 5000)}})
	if r.status != 200 || r.body["state"] != "completed" {
		t.Fatalf("ack with a 5 KB result: %d %.300s", r.status, r.raw)
	}
	if st := state(); st["state"] != "completed" || len(obj(st["result"])["r"].(string)) != 5000 {
		t.Fatalf("completed job without its result: %.300v", st)
	}
}

// Issue 31 item 3 over NATS: a batch whose reply (every job with the
// fields the server adds) would exceed max_payload is 413 before anything
// is written, so a client is never left without the answer to jobs it
// enqueued; one that fits is served.
func TestIssue31NatsBatchReplyWithinMaxPayload(t *testing.T) {
	t.Parallel()
	f := setupSize(t)
	batch := func(n int) []byte {
		jobs := make([]any, n)
		for i := range jobs {
			jobs[i] = map[string]any{"type": "b.job", "args": []any{strings.Repeat("a", 1800)}, "options": map[string]any{"queue": "nb"}}
		}
		b, _ := json.Marshal(map[string]any{"jobs": jobs})
		return b
	}
	before := f.stored()
	body := batch(1000)
	if int64(len(body)) > f.limits.MaxPayload {
		t.Fatalf("the request (%d bytes) must fit max_payload for this test", len(body))
	}
	status, env := f.natsReq("jobs.batch", body)
	if status != "413" {
		t.Fatalf("NATS batch of 1000 jobs: %s %.300v", status, env)
	}
	want413(t, "NATS batch reply", env, "jobs", f.limits.MaxPayload-512)
	if after := f.stored(); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("a refused batch wrote: %v, before %v", after, before)
	}
	status, env = f.natsReq("jobs.batch", batch(500))
	if status != "" || env["count"] != float64(500) {
		t.Fatalf("NATS batch of 500 jobs: %s %.300v", status, env)
	}
}

// Issue 31 item 3: a body limit above the NATS server's max_payload is
// refused at start, naming both numbers.
func TestIssue31BodyLimitAboveMaxPayloadRefusedAtStart(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := app.Start(ctx, app.Config{DataDir: t.TempDir(), HTTPAddr: "127.0.0.1:0", NatsAddr: "127.0.0.1:0",
		MaxBodyBytes: 3 << 20}, slog.New(slog.DiscardHandler))
	if err == nil {
		_ = s.Shutdown(ctx)
		t.Fatal("jetgate started with --max-body-bytes 3 MiB over a server of max_payload 2 MiB")
	}
	if msg := err.Error(); !strings.Contains(msg, "3145728") || !strings.Contains(msg, "2097152") || !strings.Contains(msg, "max_payload") {
		t.Fatalf("start error %q does not name both numbers", msg)
	}
}

// Issue 31 item 3: every other body that jetgate keeps some of (a cron
// job's template, a workflow's steps, a worker's metadata, progress, an
// ack's result, a nack's error, the items of the NATS batch calls) answers
// 413 naming the part, its limit and its size when that part is over its
// limit, over HTTP and NATS, never a 5xx.
func TestIssue31EveryStoredPartIs413(t *testing.T) {
	t.Parallel()
	f := setupSizeWith(t, app.Config{MaxBodyBytes: 2 << 20})
	big := strings.Repeat("z", int(f.limits.Job)+10_000)
	id := ojs.NewID()
	cases := []struct {
		method, path, subject string
		body                  map[string]any
		field                 string
		limit                 int64
	}{
		{"POST", "/ojs/v1/cron", "cron.register", map[string]any{"name": "big", "cron": "@daily", "type": "a.b", "args": []any{big}},
			"", f.limits.Job - 1024},
		{"POST", "/ojs/v1/workflows", "workflows.create", map[string]any{"type": "chain",
			"steps": []any{map[string]any{"type": "a.b", "args": []any{big}}}}, "steps", 256 << 10},
		{"POST", "/ojs/v1/workers/heartbeat", "workers.heartbeat", map[string]any{"worker_id": "w", "metadata": map[string]any{"m": big}},
			"metadata", 16 << 10},
		{"POST", "/ojs/v1/workers/beat", "workers.beat", map[string]any{"worker_id": "w", "state": "running",
			"metadata": map[string]any{"m": big}}, "metadata", 16 << 10},
		{"PUT", "/ojs/v1/jobs/" + id + "/progress", "workers.progress", map[string]any{"id": id, "data": map[string]any{"d": big}},
			"data", ojs.MaxProgressDataBytes},
		{"POST", "/ojs/v1/workers/nack", "workers.nack", map[string]any{"job_id": id, "error": map[string]any{"message": big}},
			"error", f.limits.Error},
	}
	for _, tc := range cases {
		body := tc.body
		if strings.Contains(tc.path, "/progress") {
			body = map[string]any{"data": tc.body["data"]}
		}
		r := f.c.do(tc.method, tc.path, body)
		if r.status != 413 {
			t.Fatalf("%s %s: %d %.300s, want 413", tc.method, tc.path, r.status, r.raw)
		}
		want413(t, tc.method+" "+tc.path, r.body, tc.field, tc.limit)
		b, _ := json.Marshal(tc.body)
		status, env := f.natsReq(tc.subject, b)
		if status != "413" {
			t.Fatalf("%s: %s %.300v, want 413", tc.subject, status, env)
		}
		want413(t, tc.subject, env, tc.field, tc.limit)
	}
	// The NATS batch worker calls answer each item: the large one 413
	// naming its place.
	b, _ := json.Marshal(map[string]any{"nacks": []any{map[string]any{"job_id": id, "error": map[string]any{"message": big}}}})
	if status, env := f.natsReq("workers.nackbatch", b); status != "" {
		t.Fatalf("nackbatch: %s %v", status, env)
	} else if item := obj(list(env["results"])[0]); item["status"] != float64(413) {
		t.Fatalf("nackbatch item: %v", item)
	} else {
		want413(t, "nackbatch item", map[string]any{"error": item["error"]}, "nacks[0].error", f.limits.Error)
	}
}

// envelopeOf returns a job envelope of exactly size bytes (its JSON as
// sent), in queue, its args one string padded to the size.
func envelopeOf(t *testing.T, size int, queue string) string {
	t.Helper()
	head, tail := `{"type":"mib.job","options":{"queue":"`+queue+`"},"args":["`, `"]}`
	pad := size - len(head) - len(tail)
	if pad < 0 {
		t.Fatalf("an envelope of %d bytes is too small", size)
	}
	return head + strings.Repeat("m", pad) + tail
}

// Issue 31, ojs-json-format.md 8.1 ("Implementations MUST support job
// envelopes up to 1 MiB (1,048,576 bytes) in their JSON-serialized
// form"): on the default configuration (embedded server, default body
// limit) a job envelope of exactly 1 MiB is enqueued (201), fetched with
// its args whole, and completed with a result of 64 KiB, over HTTP and
// over NATS; one byte more is 413 naming the body limit and the size,
// before anything is written.
func TestIssue31EnvelopeOfOneMiBIsServed(t *testing.T) {
	t.Parallel()
	f := setupSize(t)
	const mib = 1 << 20
	result := map[string]any{"r": strings.Repeat("r", 64<<10)}
	for _, over := range []string{"http", "nats"} {
		queue := "mib-" + over
		env := envelopeOf(t, mib, queue)
		if len(env) != mib || !json.Valid([]byte(env)) {
			t.Fatalf("the envelope is %d bytes, want %d of JSON", len(env), mib)
		}
		var id string
		if over == "http" {
			r := f.c.doRaw("POST", "/ojs/v1/jobs", env, nil)
			if r.status != 201 {
				t.Fatalf("HTTP enqueue of a 1 MiB envelope: %d %.300s", r.status, r.raw)
			}
			id = obj(r.body["job"])["id"].(string)
		} else {
			status, reply := f.natsReq("jobs.enqueue", []byte(env))
			if status != "" {
				t.Fatalf("NATS enqueue of a 1 MiB envelope: %s %.300v", status, reply)
			}
			id = obj(reply["job"])["id"].(string)
		}
		var job map[string]any
		if over == "http" {
			job = waitFetch(f.c, 30*time.Second, queue)
		} else {
			b, _ := json.Marshal(map[string]any{"queues": []string{queue}, "count": 1, "worker_id": "w"})
			status, reply := f.natsReq("workers.fetch", b)
			if status != "" || len(list(reply["jobs"])) != 1 {
				t.Fatalf("NATS fetch of a 1 MiB job: %s %.300v", status, reply)
			}
			job = obj(list(reply["jobs"])[0])
		}
		var sent struct{ Args []string }
		_ = json.Unmarshal([]byte(env), &sent)
		if args := list(job["args"]); job["id"] != id || len(args) != 1 || args[0] != sent.Args[0] {
			t.Fatalf("%s: fetched %v, want job %s with its args whole", over, job["id"], id)
		}
		ack := map[string]any{"job_id": id, "result": result}
		if over == "http" {
			if r := f.c.do("POST", "/ojs/v1/workers/ack", ack); r.status != 200 || r.body["state"] != "completed" {
				t.Fatalf("HTTP ack with a 64 KiB result: %d %.300s", r.status, r.raw)
			}
		} else {
			b, _ := json.Marshal(ack)
			if status, reply := f.natsReq("workers.ack", b); status != "" || reply["state"] != "completed" {
				t.Fatalf("NATS ack with a 64 KiB result: %s %.300v", status, reply)
			}
		}
		st := obj(f.c.must(200, "GET", "/ojs/v1/jobs/"+id, nil)["job"])
		if st["state"] != "completed" || len(obj(st["result"])["r"].(string)) != 64<<10 {
			t.Fatalf("%s: the job is %v, want completed with its result", over, st["state"])
		}
	}
	before := f.stored()
	r := f.c.doRaw("POST", "/ojs/v1/jobs", envelopeOf(t, mib+1, "mib-http"), nil)
	if r.status != 413 {
		t.Fatalf("HTTP enqueue of 1 MiB + 1 byte: %d %.300s", r.status, r.raw)
	}
	want413(t, "HTTP enqueue of 1 MiB + 1", r.body, "", mib)
	status, reply := f.natsReq("jobs.enqueue", []byte(envelopeOf(t, mib+1, "mib-nats")))
	if status != "413" {
		t.Fatalf("NATS enqueue of 1 MiB + 1 byte: %s %.300v", status, reply)
	}
	want413(t, "NATS enqueue of 1 MiB + 1", reply, "", mib)
	if after := f.stored(); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("refused enqueues wrote: %v, before %v", after, before)
	}
}

// Issue 31: with --nats-url, the record budget follows the server's
// max_payload: at NATS's default of 1 MiB a job may take 960 KiB as
// stored, and a 1 MiB envelope is 413 naming that limit (docs/nats.md
// asks for a max_payload of 2 MiB to serve 1 MiB envelopes).
func TestIssue31NatsURLBudgetFollowsMaxPayload(t *testing.T) {
	t.Parallel()
	ns := natstest.RunServer(t)
	s := startApp(t, app.Config{NatsURL: ns.ClientURL()})
	l := s.Service().PayloadLimits()
	if l.MaxPayload != 1<<20 || l.Job != 960<<10 {
		t.Fatalf("record budget %+v on a server of max_payload 1 MiB, want a job limit of 960 KiB", l)
	}
	c := client{t: t, base: s.URL()}
	r := c.doRaw("POST", "/ojs/v1/jobs", envelopeOf(t, 1<<20, "mib"), nil)
	if r.status != 413 {
		t.Fatalf("a 1 MiB envelope over a 1 MiB max_payload: %d %.300s", r.status, r.raw)
	}
	want413(t, "1 MiB envelope", r.body, "", l.Job)
}
