package app

import (
	"context"
	"time"

	"github.com/jetgate/jetgate/admission"
	"github.com/jetgate/jetgate/admission/unique"
	"github.com/jetgate/jetgate/admission/workflow"
	"github.com/jetgate/jetgate/jetstream/topology"
)

// hooks are the features that meet the job life cycle through
// admission.Lifecycle.
func (s *Server) hooks(assets *topology.Assets) []admission.Lifecycle {
	s.flows = workflow.New(workflow.Config{
		JS:        s.js,
		KV:        assets.Workflows,
		Timers:    assets.WorkflowTimers,
		Retention: max(s.cfg.Retention, s.cfg.DeadRetention),
		Events:    s.events,
		Logger:    s.log.With("component", "workflow"),
	})
	return []admission.Lifecycle{
		traceHook{},
		s.flows,
		unique.New(unique.Config{
			JS: s.js,
			KV: assets.Unique,
			// A key whose job is missing is held while an enqueue may
			// still be creating it, which includes a backpressure wait.
			Grace:  max(2*time.Minute, s.cfg.MaxBlockTimeout+time.Minute),
			Logger: s.log.With("component", "unique"),
		}),
	}
}

// startHooks starts what the hooks run besides the job life cycle, once
// the admission service runs: the workflow engine's timers.
func (s *Server) startHooks(ctx context.Context) error {
	s.flows.Bind(s.svc)
	return s.flows.Start(ctx)
}

// stopHooks stops what startHooks started.
func (s *Server) stopHooks() {
	if s.flows != nil {
		s.flows.Stop()
	}
}
