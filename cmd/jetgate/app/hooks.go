package app

import (
	"time"

	"github.com/jetgate/jetgate/admission"
	"github.com/jetgate/jetgate/admission/unique"
	"github.com/jetgate/jetgate/jetstream/topology"
)

// hooks are the features that meet the job life cycle through
// admission.Lifecycle.
func (s *Server) hooks(assets *topology.Assets) []admission.Lifecycle {
	return []admission.Lifecycle{
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
