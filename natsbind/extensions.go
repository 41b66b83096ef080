package natsbind

import (
	"context"

	"github.com/jetgate/jetgate/admission/authz"
	"github.com/jetgate/jetgate/admission/ojs"
	"github.com/jetgate/jetgate/admission/ojs/wire"
)

// extensionEndpoints are the endpoints of the optional backends beyond the
// core: cron, workflows, the worker registry, pools, worker groups and
// queue aging, each served when the Backend implements it (as HTTP does).
func (s *Service) extensionEndpoints() []endpoint {
	var eps []endpoint
	if cb, ok := s.b.(CronBackend); ok {
		eps = append(eps, cronEndpoints(cb)...)
	}
	if wb, ok := s.b.(WorkflowBackend); ok {
		eps = append(eps, workflowEndpoints(wb)...)
	}
	if wb, ok := s.b.(WorkerBackend); ok {
		eps = append(eps, s.workerEndpoints(wb)...)
	}
	if pb, ok := s.b.(PoolBackend); ok {
		eps = append(eps, poolEndpoints(pb)...)
	}
	if pb, ok := s.b.(PriorityAdminBackend); ok {
		eps = append(eps, priorityAdminEndpoints(pb)...)
	}
	return eps
}

// cronEndpoints (ojs-http-binding.md 13).
func cronEndpoints(cb CronBackend) []endpoint {
	return []endpoint{
		ep("cron.list", authz.OpAdmin, "GET /ojs/v1/cron", func(c *call) (any, error) {
			page, err := parseQuery(c, wire.CronPage)
			if err != nil {
				return nil, err
			}
			res, err := cb.CronJobs(c.ctx, page)
			if err != nil {
				return nil, err
			}
			return wire.CronListReply(res, page), nil
		}),
		ep("cron.register", authz.OpAdmin, "POST /ojs/v1/cron", func(c *call) (any, error) {
			o, err := c.object()
			if err != nil {
				return nil, err
			}
			cj, err := wire.DecodeCron(o)
			if err != nil {
				return nil, err
			}
			out, err := cb.CronRegister(c.ctx, cj)
			if err != nil {
				return nil, err
			}
			return wire.CronReply(out), nil
		}),
		ep("cron.get", authz.OpAdmin, "GET /ojs/v1/cron/{name}", func(c *call) (any, error) {
			name, err := strField(c, "name")
			if err != nil {
				return nil, err
			}
			cj, err := cb.CronJob(c.ctx, name)
			if err != nil {
				return nil, err
			}
			return wire.CronReply(cj), nil
		}),
		ep("cron.put", authz.OpAdmin, "PUT /ojs/v1/cron/{name}", func(c *call) (any, error) {
			name, err := strField(c, "name")
			if err != nil {
				return nil, err
			}
			o, err := c.object()
			if err != nil {
				return nil, err
			}
			out, _, err := cb.CronPut(c.ctx, name, func(cur *ojs.CronJob) (ojs.CronJob, error) {
				return wire.MergeCron(name, cur, o)
			})
			if err != nil {
				return nil, err
			}
			return wire.CronReply(out), nil
		}),
		ep("cron.delete", authz.OpAdmin, "DELETE /ojs/v1/cron/{name}", func(c *call) (any, error) {
			name, err := strField(c, "name")
			if err != nil {
				return nil, err
			}
			if err := cb.CronDelete(c.ctx, name); err != nil {
				return nil, err
			}
			return map[string]any{"deleted": true, "name": name}, nil
		}),
	}
}

// workflowEndpoints (ojs-http-binding.md 14): producers submit, read and
// cancel workflows.
func workflowEndpoints(wb WorkflowBackend) []endpoint {
	byID := func(op func(*call, string) (*ojs.Workflow, error)) func(c *call) (any, error) {
		return func(c *call) (any, error) {
			id, err := strField(c, "id")
			if err != nil {
				return nil, err
			}
			wf, err := op(c, id)
			if err != nil {
				return nil, err
			}
			return wire.WorkflowReply{Workflow: wf}, nil
		}
	}
	return []endpoint{
		ep("workflows.create", authz.OpProduce, "POST /ojs/v1/workflows", func(c *call) (any, error) {
			spec, err := ojs.ParseWorkflow(c.data)
			if err != nil {
				return nil, err
			}
			wf, err := wb.CreateWorkflow(c.ctx, spec)
			if err != nil {
				return nil, err
			}
			return wire.WorkflowReply{Workflow: wf}, nil
		}),
		ep("workflows.list", authz.OpAdmin, "GET /ojs/v1/workflows", func(c *call) (any, error) {
			q, err := parseQuery(c, wire.ParseWorkflowListQuery)
			if err != nil {
				return nil, err
			}
			return wb.Workflows(c.ctx, q)
		}),
		ep("workflows.get", authz.OpProduce, "GET /ojs/v1/workflows/{id}", byID(func(c *call, id string) (*ojs.Workflow, error) {
			return wb.Workflow(c.ctx, id)
		})),
		ep("workflows.cancel", authz.OpProduce, "DELETE /ojs/v1/workflows/{id}", byID(func(c *call, id string) (*ojs.Workflow, error) {
			return wb.CancelWorkflow(c.ctx, id)
		})),
	}
}

// workerEndpoints: the graceful shutdown extension's beat, a worker's
// health, and the admin API's worker calls (ojs-admin-api.md 9).
func (s *Service) workerEndpoints(wb WorkerBackend) []endpoint {
	worker := func(op func(*call, string) (any, error)) func(c *call) (any, error) {
		return func(c *call) (any, error) {
			id, err := strField(c, "id")
			if err != nil {
				return nil, err
			}
			if id, err = wire.WorkerID(id, "id"); err != nil {
				return nil, err
			}
			return op(c, id)
		}
	}
	directive := func(d string) func(c *call) (any, error) {
		return worker(func(c *call, id string) (any, error) { return wb.Directive(c.ctx, id, d) })
	}
	return []endpoint{
		ep("workers.beat", authz.OpWork, "POST /ojs/v1/workers/beat", func(c *call) (any, error) {
			req, res, err := s.beat(c)
			if err != nil {
				return nil, err
			}
			return wire.BeatReply(req, res), nil
		}),
		ep("workers.health", authz.OpWork, "GET /ojs/v1/workers/{id}/health", worker(func(c *call, id string) (any, error) {
			return wb.WorkerHealth(c.ctx, id)
		})),
		ep("admin.workers", authz.OpAdmin, "GET /ojs/v1/admin/workers", func(c *call) (any, error) {
			page, per, err := adminPage(c)
			if err != nil {
				return nil, err
			}
			res, err := wb.ListWorkers(c.ctx, page, per)
			if err != nil {
				return nil, err
			}
			return wire.WorkerListReply(res, page, per), nil
		}),
		ep("admin.worker", authz.OpAdmin, "GET /ojs/v1/admin/workers/{id}", worker(func(c *call, id string) (any, error) {
			return wb.Worker(c.ctx, id)
		})),
		ep("admin.workerquiet", authz.OpAdmin, "POST /ojs/v1/admin/workers/{id}/quiet", directive(ojs.WorkerQuiet)),
		ep("admin.workerterminate", authz.OpAdmin, "POST /ojs/v1/admin/workers/{id}/terminate", directive(ojs.WorkerTerminate)),
		ep("admin.workerderegister", authz.OpAdmin, "DELETE /ojs/v1/admin/workers/{id}", worker(func(c *call, id string) (any, error) {
			res, err := wb.Deregister(c.ctx, id)
			if err != nil {
				return nil, err
			}
			return map[string]any{"worker": res, "deregistered": true}, nil
		})),
	}
}

// named reads the name field that stands for a path's {pool} or {group}
// and the rest of the body (without it) as an object.
func named(c *call, field string) (string, wire.Object, error) {
	name, err := strField(c, field)
	if err != nil {
		return "", nil, err
	}
	if name, err = wire.GroupName(name, field, field); err != nil {
		return "", nil, err
	}
	return name, restOf(c, field), nil
}

// getNamed, setNamed and deleteNamed are the handlers of a resource that
// the body's field names ({"pool"}, {"group"}), as the path's {pool} or
// {group} does over HTTP: set decodes the other fields as the resource.
func getNamed[R any](field string, get func(context.Context, string) (R, error)) func(c *call) (any, error) {
	return func(c *call) (any, error) {
		name, _, err := named(c, field)
		if err != nil {
			return nil, err
		}
		return get(c.ctx, name)
	}
}

func setNamed[T, R any](field string, decode func(string, wire.Object) (T, error), set func(context.Context, T) (R, error)) func(c *call) (any, error) {
	return func(c *call) (any, error) {
		name, o, err := named(c, field)
		if err != nil {
			return nil, err
		}
		v, err := decode(name, o)
		if err != nil {
			return nil, err
		}
		return set(c.ctx, v)
	}
}

func deleteNamed(field string, del func(context.Context, string) error) func(c *call) (any, error) {
	return func(c *call) (any, error) {
		name, _, err := named(c, field)
		if err != nil {
			return nil, err
		}
		if err := del(c.ctx, name); err != nil {
			return nil, err
		}
		return map[string]any{"name": name, "deleted": true}, nil
	}
}

// poolEndpoints: the fair scheduling extension's pools (10).
func poolEndpoints(pb PoolBackend) []endpoint {
	return []endpoint{
		ep("pools.list", authz.OpAdmin, "GET /ojs/v1/admin/pools", func(c *call) (any, error) {
			ps, err := pb.ListPools(c.ctx)
			if err != nil {
				return nil, err
			}
			if ps == nil {
				ps = []ojs.Pool{}
			}
			return map[string]any{"items": ps}, nil
		}),
		ep("pools.get", authz.OpAdmin, "GET /ojs/v1/admin/pools/{pool}", getNamed("pool", poolReply(pb.Pool))),
		ep("pools.set", authz.OpAdmin, "PUT /ojs/v1/admin/pools/{pool}", setNamed("pool", wire.DecodePool, poolReply(pb.SetPool))),
		ep("pools.delete", authz.OpAdmin, "DELETE /ojs/v1/admin/pools/{pool}", deleteNamed("pool", pb.DeletePool)),
		ep("pools.stats", authz.OpAdmin, "GET /ojs/v1/admin/scheduling/stats", func(c *call) (any, error) {
			st, err := pb.SchedulingStats(c.ctx)
			if err != nil {
				return nil, err
			}
			return wire.NewSchedulingStatsReply(st), nil
		}),
	}
}

// poolReply answers a pool as the HTTP binding does (wire.PoolReply).
func poolReply[T any](op func(context.Context, T) (*ojs.Pool, error)) func(context.Context, T) (wire.PoolReply, error) {
	return func(ctx context.Context, v T) (wire.PoolReply, error) {
		p, err := op(ctx, v)
		if err != nil {
			return wire.PoolReply{}, err
		}
		return wire.NewPoolReply(p), nil
	}
}

// priorityAdminEndpoints: worker groups and queue aging (ojs-priority.md).
func priorityAdminEndpoints(pb PriorityAdminBackend) []endpoint {
	return []endpoint{
		ep("groups.list", authz.OpAdmin, "GET /ojs/v1/admin/worker-groups", func(c *call) (any, error) {
			gs, err := pb.WorkerGroups(c.ctx)
			if err != nil {
				return nil, err
			}
			return map[string]any{"groups": gs}, nil
		}),
		ep("groups.get", authz.OpAdmin, "GET /ojs/v1/admin/worker-groups/{group}", getNamed("group", pb.WorkerGroup)),
		ep("groups.set", authz.OpAdmin, "PUT /ojs/v1/admin/worker-groups/{group}", setNamed("group", wire.DecodeGroup, pb.SetWorkerGroup)),
		ep("groups.delete", authz.OpAdmin, "DELETE /ojs/v1/admin/worker-groups/{group}", deleteNamed("group", pb.DeleteWorkerGroup)),
		// {"queue"} reads a queue's aging; {"queue", "interval_ms" |
		// "interval", "step"?, "min_priority"?} sets it.
		ep("queues.aging", authz.OpAdmin, "GET|PUT /ojs/v1/admin/queues/{name}/aging",
			queueSetting(pb.QueueAging, wire.DecodeAging, pb.SetQueueAging)),
		ep("queues.clearaging", authz.OpAdmin, "DELETE /ojs/v1/admin/queues/{name}/aging", func(c *call) (any, error) {
			q, err := queueField(c)
			if err != nil {
				return nil, err
			}
			return pb.SetQueueAging(c.ctx, q, nil)
		}),
	}
}
