package natsbind

import (
	"context"

	"github.com/jetgate/jetgate/admission/authz"
	"github.com/jetgate/jetgate/admission/ojs"
	"github.com/jetgate/jetgate/admission/ojs/wire"
)

// listQueues is GET /ojs/v1/queues: {"limit"?, "offset"?, "cursor"?}.
func (s *Service) listQueues(c *call) (any, error) {
	page, err := parseQuery(c, wire.QueuesPage)
	if err != nil {
		return nil, err
	}
	queues, err := s.b.ListQueues(c.ctx)
	if err != nil {
		return nil, err
	}
	return wire.PageQueues(queues, page), nil
}

func (s *Service) queueStats(c *call) (any, error) {
	q, err := queueField(c)
	if err != nil {
		return nil, err
	}
	return s.b.QueueStats(c.ctx, q)
}

func (s *Service) pauseQueue(c *call) (any, error)  { return s.setQueueState(c, s.b.PauseQueue) }
func (s *Service) resumeQueue(c *call) (any, error) { return s.setQueueState(c, s.b.ResumeQueue) }

func (s *Service) setQueueState(c *call, op func(context.Context, string) (*ojs.QueueInfo, error)) (any, error) {
	q, err := queueField(c)
	if err != nil {
		return nil, err
	}
	info, err := op(c.ctx, q)
	if err != nil {
		return nil, err
	}
	return wire.NewQueueState(q, info), nil
}

// listDeadLetter is GET /ojs/v1/dead-letter: {"queue"?, "limit"?,
// "offset"?, "cursor"?}.
func (s *Service) listDeadLetter(c *call) (any, error) {
	q, err := parseQuery(c, wire.DeadLetterQuery)
	if err != nil {
		return nil, err
	}
	res, err := s.b.ListDeadLetter(c.ctx, q)
	if err != nil {
		return nil, err
	}
	return ojs.JobPage{Jobs: wire.PublicJobs(res.Jobs), Pagination: res.Pagination}, nil
}

func (s *Service) deleteDeadLetter(c *call) (any, error) {
	id, err := jobIDField(c, "dead_letter_job")
	if err != nil {
		return nil, err
	}
	if err := s.b.DeleteDeadLetter(c.ctx, id); err != nil {
		return nil, err
	}
	return wire.DeletedReply{Deleted: true, JobID: id}, nil
}

// listEvents is GET /ojs/v1/events: {"types"?, "type"?, "queues"?,
// "job_types"?, "limit"?, "since"?} (each list a string of
// comma-separated items or an array of them).
func (s *Service) listEvents(c *call) (any, error) {
	q, err := parseQuery(c, wire.ParseEventQuery)
	if err != nil {
		return nil, err
	}
	evs, err := s.b.RecentEvents(c.ctx, q)
	if err != nil {
		return nil, err
	}
	return wire.NewEventsReply(evs), nil
}

// rateLimitEndpoints are the rate limiting extension's calls
// (ojs-rate-limiting.md 10).
func (s *Service) rateLimitEndpoints(rb RateLimitBackend) []endpoint {
	key := func(c *call) (string, error) {
		k, err := strField(c, "key")
		if err != nil {
			return "", err
		}
		return wire.RateKey(k)
	}
	return []endpoint{
		ep("ratelimits.list", authz.OpAdmin, "GET /ojs/v1/rate-limits", func(c *call) (any, error) {
			page, err := parseQuery(c, wire.RateLimitsPage)
			if err != nil {
				return nil, err
			}
			return rb.RateLimits(c.ctx, page)
		}),
		ep("ratelimits.get", authz.OpAdmin, "GET /ojs/v1/rate-limits/{key}", func(c *call) (any, error) {
			k, err := key(c)
			if err != nil {
				return nil, err
			}
			return rb.RateLimit(c.ctx, k)
		}),
		ep("ratelimits.override", authz.OpAdmin, "PUT /ojs/v1/rate-limits/{key}", func(c *call) (any, error) {
			k, err := key(c)
			if err != nil {
				return nil, err
			}
			body, err := withoutField(c, "key")
			if err != nil {
				return nil, err
			}
			ov, err := wire.DecodeOverride(body)
			if err != nil {
				return nil, err
			}
			return rb.SetRateLimitOverride(c.ctx, k, ov)
		}),
		ep("ratelimits.clear", authz.OpAdmin, "DELETE /ojs/v1/rate-limits/{key}", func(c *call) (any, error) {
			k, err := key(c)
			if err != nil {
				return nil, err
			}
			return rb.ResetRateLimit(c.ctx, k)
		}),
		// A queue's own limit (7.2, RL-R005): {"queue"} reads it,
		// {"queue", "concurrency"?, "rate"?, "throttle"?} sets it.
		ep("queues.ratelimit", authz.OpAdmin, "GET|PUT /ojs/v1/admin/queues/{name}/rate-limit", func(c *call) (any, error) {
			q, err := queueField(c)
			if err != nil {
				return nil, err
			}
			if o, _ := c.object(); len(o) > 1 {
				body, err := withoutField(c, "queue")
				if err != nil {
					return nil, err
				}
				l, err := wire.DecodeQueueLimits(body)
				if err != nil {
					return nil, err
				}
				if _, err := rb.SetQueueRateLimit(c.ctx, q, l); err != nil {
					return nil, err
				}
			}
			return rb.QueueRateLimit(c.ctx, q)
		}),
		ep("queues.clearratelimit", authz.OpAdmin, "DELETE /ojs/v1/admin/queues/{name}/rate-limit", func(c *call) (any, error) {
			q, err := queueField(c)
			if err != nil {
				return nil, err
			}
			return rb.SetQueueRateLimit(c.ctx, q, nil)
		}),
	}
}

// adminEndpoints are the operator API's calls (ojs-admin-api.md 6-11):
// what `jetgate jobs ls` and dashboards read.
func (s *Service) adminEndpoints(ab AdminBackend) []endpoint {
	jobs := func(forced ojs.State) func(c *call) (any, error) {
		return func(c *call) (any, error) {
			v, err := queryValues(c)
			if err != nil {
				return nil, err
			}
			q, err := wire.ParseJobListQuery(v, forced)
			if err != nil {
				return nil, err
			}
			res, err := ab.AdminJobs(c.ctx, q)
			if err != nil {
				return nil, err
			}
			return wire.NewJobList(res), nil
		}
	}
	return []endpoint{
		ep("admin.stats", authz.OpAdmin, "GET /ojs/v1/admin/stats", func(c *call) (any, error) { return ab.AdminStats(c.ctx) }),
		ep("admin.queues", authz.OpAdmin, "GET /ojs/v1/admin/queues", func(c *call) (any, error) {
			page, per, err := adminPage(c)
			if err != nil {
				return nil, err
			}
			return ab.AdminQueues(c.ctx, page, per)
		}),
		ep("admin.queue", authz.OpAdmin, "GET /ojs/v1/admin/queues/{name}", func(c *call) (any, error) {
			q, err := queueField(c)
			if err != nil {
				return nil, err
			}
			return ab.AdminQueue(c.ctx, q)
		}),
		ep("admin.jobs", authz.OpAdmin, "GET /ojs/v1/admin/jobs", jobs("")),
		ep("admin.job", authz.OpAdmin, "GET /ojs/v1/admin/jobs/{id}", onJob("job", s.b.Get, func(j *ojs.Job) any { return wire.AdminJob(j) })),
		ep("admin.deadletter", authz.OpAdmin, "GET /ojs/v1/admin/dead-letter", jobs(ojs.StateDiscarded)),
		ep("admin.bulk", authz.OpAdmin, "POST /ojs/v1/admin/jobs/bulk/{action}", func(c *call) (any, error) {
			action, err := strField(c, "action")
			if err != nil {
				return nil, err
			}
			req, err := wire.DecodeBulk(action, c.data)
			if err != nil {
				return nil, err
			}
			return ab.BulkJobs(c.ctx, req)
		}),
		ep("deadletter.stats", authz.OpAdmin, "GET /ojs/v1/dead-letter/stats", func(c *call) (any, error) { return ab.DeadLetterStats(c.ctx) }),
	}
}
