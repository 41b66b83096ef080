package natsbind

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jetgate/jetgate/admission/authz"
	"github.com/jetgate/jetgate/admission/ojs"
	"github.com/jetgate/jetgate/admission/ojs/wire"
)

// endpoint is one row of the endpoint table.
type endpoint struct {
	name    string        // micro endpoint name, e.g. "jobs-enqueue"
	subject string        // after the prefix, e.g. "jobs.enqueue"
	op      authz.Op      // the role table's class, as the HTTP route's
	http    string        // the HTTP route it mirrors ("" for NATS only)
	batch   bool          // bounded by MaxBatchBodyBytes
	extra   time.Duration // added to the request timeout (fetch waits)
	noBody  bool          // reads no field: the body is only checked
	h       func(c *call) (any, error)
}

func ep(subject string, op authz.Op, http string, h func(c *call) (any, error)) endpoint {
	name := []byte(subject)
	for i, b := range name {
		if b == '.' {
			name[i] = '-'
		}
	}
	return endpoint{name: string(name), subject: subject, op: op, http: http, h: h}
}

// endpoints is the endpoint table (docs/nats.md; NATSBIND.md): every
// operation of the HTTP binding's core, job, worker, queue, rate limit,
// dead letter and event routes, plus the NATS-only batch worker calls.
// Optional backends add their endpoints as they add HTTP routes.
func (s *Service) endpoints() []endpoint {
	eps := []endpoint{
		ep("health", authz.OpOpen, "GET /ojs/v1/health", s.health),

		ep("jobs.enqueue", authz.OpProduce, "POST /ojs/v1/jobs", s.enqueue),
		ep("jobs.batch", authz.OpProduce, "POST /ojs/v1/jobs/batch", s.enqueueBatch),
		ep("jobs.get", authz.OpProduce, "GET /ojs/v1/jobs/{id}", onJob("job", s.b.Get, publicJob)),
		ep("jobs.cancel", authz.OpProduce, "DELETE /ojs/v1/jobs/{id}", s.cancelJob),
		ep("jobs.activate", authz.OpAdmin, "POST /ojs/v1/jobs/{id}/activate", onJob("job", s.b.Activate, func(j *ojs.Job) any {
			return wire.JobReply{Job: wire.WithField(j, "previous_state", ojs.StatePending)}
		})),

		ep("workers.fetch", authz.OpWork, "POST /ojs/v1/workers/fetch", s.fetch),
		ep("workers.ack", authz.OpWork, "POST /ojs/v1/workers/ack", s.ack),
		ep("workers.nack", authz.OpWork, "POST /ojs/v1/workers/nack", s.nack),
		ep("workers.ackbatch", authz.OpWork, "", s.ackBatch),
		ep("workers.nackbatch", authz.OpWork, "", s.nackBatch),
		ep("workers.heartbeat", authz.OpWork, "POST /ojs/v1/workers/heartbeat", s.heartbeat),

		ep("queues.list", authz.OpAdmin, "GET /ojs/v1/queues", s.listQueues),
		ep("queues.stats", authz.OpAdmin, "GET /ojs/v1/queues/{name}/stats", s.queueStats),
		ep("queues.pause", authz.OpAdmin, "POST /ojs/v1/queues/{name}/pause", s.pauseQueue),
		ep("queues.resume", authz.OpAdmin, "POST /ojs/v1/queues/{name}/resume", s.resumeQueue),

		ep("deadletter.list", authz.OpAdmin, "GET /ojs/v1/dead-letter", s.listDeadLetter),
		ep("deadletter.retry", authz.OpAdmin, "POST /ojs/v1/dead-letter/{id}/retry", onJob("dead_letter_job", s.b.RetryDeadLetter, publicJob)),
		ep("deadletter.delete", authz.OpAdmin, "DELETE /ojs/v1/dead-letter/{id}", s.deleteDeadLetter),

		ep("events.list", authz.OpAdmin, "GET /ojs/v1/events", s.listEvents),
	}
	if pb, ok := s.b.(PriorityBackend); ok {
		eps = append(eps,
			ep("jobs.patch", authz.OpAdmin, "PATCH /ojs/v1/jobs/{id}", func(c *call) (any, error) { return s.patchJob(c, pb) }),
			ep("queues.prioritystats", authz.OpAdmin, "GET /ojs/v1/queues/{name}/priority-stats", func(c *call) (any, error) {
				q, err := queueField(c)
				if err != nil {
					return nil, err
				}
				return pb.PriorityStats(c.ctx, q)
			}))
	}
	if pb, ok := s.b.(ProgressBackend); ok {
		eps = append(eps,
			ep("workers.progress", authz.OpWork, "PUT /ojs/v1/jobs/{id}/progress", func(c *call) (any, error) { return s.putProgress(c, pb) }),
			ep("jobs.progress", authz.OpProduce, "GET /ojs/v1/jobs/{id}/progress", func(c *call) (any, error) {
				id, err := jobIDField(c, "job")
				if err != nil {
					return nil, err
				}
				st, err := pb.Progress(c.ctx, id)
				progressHeaders(c, st)
				return st, err
			}))
	}
	if bb, ok := s.b.(BackpressureBackend); ok {
		// {"queue"} reads a queue's config; {"queue", ...config} (the
		// body of PUT .../queues/{name}/config) writes it.
		eps = append(eps, ep("queues.config", authz.OpAdmin, "GET|PUT /ojs/v1/queues/{name}/config",
			queueSetting(bb.QueueConfig, wire.DecodeBackpressure, bb.SetQueueBackpressure)))
	}
	if rb, ok := s.b.(RateLimitBackend); ok {
		eps = append(eps, s.rateLimitEndpoints(rb)...)
	}
	if ab, ok := s.b.(AdminBackend); ok {
		eps = append(eps, s.adminEndpoints(ab)...)
	}
	eps = append(eps, s.extensionEndpoints()...)
	for i := range eps {
		switch eps[i].subject {
		case "health", "admin.stats", "deadletter.stats", "pools.list", "pools.stats", "groups.list":
			eps[i].noBody = true
		case "jobs.batch", "workers.ackbatch", "workers.nackbatch":
			eps[i].batch = true
		case "workers.fetch":
			eps[i].extra = MaxFetchWait
		}
	}
	return eps
}

// health is GET /ojs/v1/health: the backend's health, 503 when down.
func (s *Service) health(c *call) (any, error) {
	h := s.b.Health(c.ctx)
	if h.Version == "" {
		h.Version = s.cfg.Version
	}
	if h.Status != "ok" && h.Backend.Status != ojs.BackendDegraded {
		if h.Status == "" {
			h.Status = "degraded"
		}
		// HTTP answers 503 with the health body; so does NATS, with
		// micro's error headers.
		return statusBody{status: 503, code: ojs.CodeBackendError, body: h}, nil
	}
	return h, nil
}

// enqueue is PUSH: the job envelope; the reply is {"job": ...} ({"job",
// "deduplicated": true} for a unique job's duplicate). The header
// OJS-Block-Timeout waits for room in a full queue, as over HTTP; the
// pressure headers of a bounded queue come back on the reply.
func (s *Service) enqueue(c *call) (any, error) {
	job, rep, err := push(c, wire.DecodeJob, s.b.Enqueue)
	if dd, ok := errors.AsType[*ojs.DeduplicatedError](err); ok {
		pressure(c, rep)
		return wire.DeduplicatedReply{Job: dd.Job.Public(), Deduplicated: true}, nil
	}
	if err != nil {
		return nil, err
	}
	pressure(c, rep)
	return jobReply(job.Public())
}

// enqueueBatch is PUSH (batch): {"jobs": [...]}, all or nothing. A batch
// whose reply (every job, with the fields the server adds) could not be
// sent within the server's max_payload is refused before it is enqueued:
// its jobs would be stored and the client, never answered, would send
// them again.
func (s *Service) enqueueBatch(c *call) (any, error) {
	decode := func(b []byte) ([]*ojs.Job, error) {
		jobs, err := wire.DecodeBatch(b)
		if err != nil {
			return nil, err
		}
		return jobs, s.checkBatchReply(jobs)
	}
	jobs, rep, err := push(c, decode, s.b.EnqueueBatch)
	if err != nil {
		return nil, err
	}
	pressure(c, rep)
	out := wire.PublicJobs(jobs)
	return wire.BatchReply{Jobs: out, Count: len(out)}, nil
}

// batchReplyPerJob is room for what the server adds to a job of a batch
// before it answers it (state, attempts, timestamps, the trace context).
const batchReplyPerJob = 320

// checkBatchReply refuses (413) a batch whose reply would exceed the
// server's max_payload (issue 31), naming that limit and the reply's size.
func (s *Service) checkBatchReply(jobs []*ojs.Job) error {
	limit := s.nc.MaxPayload() - replyHeaders
	size := int64(len(`{"jobs":[],"count":}`) + 8)
	buf := ojs.GetBuffer()
	defer ojs.PutBuffer(buf)
	for _, j := range jobs {
		b, err := j.AppendPublicJSON((*buf)[:0])
		if err != nil {
			return err
		}
		*buf = b
		size += int64(len(b)) + batchReplyPerJob + 1
	}
	if size <= limit {
		return nil
	}
	return &ojs.TooLargeError{Field: "jobs", What: "batch reply", Limit: limit, Size: size,
		Hint: fmt.Sprintf("Send fewer jobs per batch: the reply, every job with the fields the server adds, "+
			"must fit the NATS server's max_payload of %d bytes (or enqueue over HTTP).", s.nc.MaxPayload())}
}

// replyHeaders is room for the headers of a reply.
const replyHeaders = 512

// push decodes an enqueue's body and enqueues it, waiting for room in a
// full queue as the header OJS-Block-Timeout asks; it returns the report
// of the pressure the enqueue met for the reply's headers. The enqueue's
// own error comes back in an error envelope (wire.InEnvelope).
func push[T any](c *call, decode func([]byte) (T, error), enqueue func(context.Context, T) (T, error)) (T, *ojs.PressureReport, error) {
	var zero T
	in, err := decode(c.data)
	if err != nil {
		return zero, nil, err
	}
	ctx, rep, err := wire.EnqueueContext(c.ctx, header(c.hdr, wire.HeaderBlockTimeout))
	if err != nil {
		return zero, nil, err
	}
	out, err := enqueue(ctx, in)
	if err != nil {
		return zero, rep, wire.InEnvelope(err)
	}
	return out, rep, nil
}

// pressure sets the X-OJS-Queue-* headers of the most pressed bounded
// queue an enqueue touched (ojs-backpressure.md 7.3).
func pressure(c *call, rep *ojs.PressureReport) {
	if rep == nil {
		return
	}
	if p, ok := rep.Highest(); ok {
		h := map[string][]string{}
		wire.SetPressureHeaders(h, p)
		for k, v := range h {
			c.out[headerName(k)] = v
		}
	}
}

// onJob is the handler of a call on the one job {"id"} names (resource
// names what a 404 says is missing): op acts on it, and reply makes the
// answer of the job op returns.
func onJob(resource string, op func(context.Context, string) (*ojs.Job, error), reply func(*ojs.Job) any) func(c *call) (any, error) {
	return func(c *call) (any, error) {
		id, err := jobIDField(c, resource)
		if err != nil {
			return nil, err
		}
		job, err := op(c.ctx, id)
		if err != nil {
			return nil, err
		}
		return reply(job), nil
	}
}

// publicJob is the {"job": ...} reply of a job.
func publicJob(j *ojs.Job) any { return wire.JobReply{Job: j.Public()} }

func (s *Service) cancelJob(c *call) (any, error) {
	id, err := jobIDField(c, "job")
	if err != nil {
		return nil, err
	}
	job, prev, err := s.b.Cancel(c.ctx, id)
	if err != nil {
		return nil, err
	}
	return wire.JobReply{Job: wire.WithField(job, "previous_state", prev)}, nil
}

// patchJob is PATCH /ojs/v1/jobs/{id}: {"id", "priority"?, timeout
// fields?}; the reply as HTTP's.
func (s *Service) patchJob(c *call, pb PriorityBackend) (any, error) {
	id, body, err := jobBody(c)
	if err != nil {
		return nil, err
	}
	tb, timeouts := s.b.(TimeoutBackend)
	p, err := wire.DecodePatch(body, timeouts)
	if err != nil {
		return nil, err
	}
	if p.Timeouts == nil {
		return pb.SetPriority(c.ctx, id, *p.Priority)
	}
	j, prev, err := tb.PatchJob(c.ctx, id, p.Timeouts, p.Priority)
	if err != nil {
		return nil, err
	}
	return wire.PatchReply{Job: j.Public(), PreviousPriority: prev}, nil
}

// putProgress is PUT /ojs/v1/jobs/{id}/progress (PRG-001): {"id",
// "progress"?, "message"?, "data"?, "checkpoint"?}.
func (s *Service) putProgress(c *call, pb ProgressBackend) (any, error) {
	id, body, err := jobBody(c)
	if err != nil {
		return nil, err
	}
	u, err := ojs.ParseProgressUpdate(body)
	if err != nil {
		return nil, err
	}
	st, _, err := pb.ReportProgress(c.ctx, id, u)
	if err != nil {
		return nil, err
	}
	progressHeaders(c, st)
	return st, nil
}

// jobBody reads the job {"id"} names and the rest of the body, for the
// calls that change a job (PATCH and PUT .../jobs/{id}/...).
func jobBody(c *call) (string, []byte, error) {
	id, err := jobIDField(c, "job")
	if err != nil {
		return "", nil, err
	}
	body, err := withoutField(c, "id")
	return id, body, err
}

// progressHeaders sets X-OJS-Progress as ojs-progress.md 10.3 does on HTTP.
func progressHeaders(c *call, st *ojs.ProgressStatus) {
	if st != nil && st.Progress != nil {
		c.out.Set("X-OJS-Progress", formatFloat(*st.Progress))
	}
}

func (s *Service) ack(c *call) (any, error)  { return s.ackOne(c.ctx, c.data) }
func (s *Service) nack(c *call) (any, error) { return s.nackOne(c.ctx, c.data) }

// ackOne and nackOne run one ack or nack body: workers.ack's and
// workers.nack's, or one item of workers.ackbatch's and
// workers.nackbatch's.
func (s *Service) ackOne(ctx context.Context, body []byte) (any, error) {
	req, err := wire.DecodeAck(body)
	if err != nil {
		return nil, err
	}
	res, err := s.b.Ack(ctx, req)
	if err != nil {
		return nil, err
	}
	return wire.NewAckReply(res), nil
}

func (s *Service) nackOne(ctx context.Context, body []byte) (any, error) {
	req, err := wire.DecodeNack(body)
	if err != nil {
		return nil, err
	}
	return s.b.Nack(ctx, req)
}

func (s *Service) heartbeat(c *call) (any, error) {
	_, res, err := s.beat(c)
	if err != nil {
		return nil, err
	}
	return wire.NewHeartbeatReply(res), nil
}

// beat runs a heartbeat body (workers.heartbeat's and workers.beat's).
func (s *Service) beat(c *call) (ojs.HeartbeatRequest, *ojs.HeartbeatResult, error) {
	req, err := wire.DecodeHeartbeat(c.data)
	if err != nil {
		return req, nil, err
	}
	res, err := s.b.Heartbeat(c.ctx, req)
	return req, res, err
}
