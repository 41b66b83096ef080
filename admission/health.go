package admission

import (
	"context"
	"fmt"
	"time"

	"github.com/jetgate/jetgate/admission/ojs"
)

// Health reports the NATS connection and a JetStream round trip.
func (s *Service) Health(ctx context.Context) ojs.Health {
	h := ojs.Health{
		Status:        "ok",
		Version:       "1.0",
		UptimeSeconds: int64(s.now().Sub(s.started) / time.Second),
		Backend:       ojs.HealthBackend{Type: "nats-jetstream", Status: "connected", Server: s.nc.ConnectedUrlRedacted()},
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	start := time.Now()
	if _, err := s.js.AccountInfo(ctx); err != nil {
		h.Status = "degraded"
		h.Backend.Status = "disconnected"
		if s.nc.IsConnected() {
			h.Backend.Status = "jetstream_unavailable"
		}
		h.Backend.Error = err.Error()
		return h
	}
	h.Backend.LatencyMs = float64(time.Since(start).Microseconds()) / 1000
	return h
}

// RecentEvents returns recent lifecycle events.
// A read that fails is tried once more: on a cluster, the short-lived
// reader consumer can lose a race with the stream's own bookkeeping.
func (s *Service) RecentEvents(ctx context.Context, q ojs.EventQuery) ([]ojs.Event, error) {
	evs, err := s.events.Recent(ctx, q)
	if err == nil || ctx.Err() != nil {
		return evs, err
	}
	s.log.Warn("reading recent events failed, trying again", "error", err)
	evs, err = s.events.Recent(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("%w: recent events: %w", ojs.ErrUnavailable, err)
	}
	return evs, nil
}
