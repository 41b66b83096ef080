package admission

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/jetgate/jetgate/admission/ojs"
	"github.com/jetgate/jetgate/jetstream/topology"
)

const (
	// healthTimeout bounds the JetStream round trip of Health and Ready.
	healthTimeout = 2 * time.Second
	// slowBackend is the round trip from which the backend is degraded.
	slowBackend = time.Second
	// readyTTL is how long a readiness answer is reused: probes cost at
	// most one JetStream request per readyTTL per process.
	readyTTL = time.Second
)

// Health reports the NATS connection and a JetStream round trip. The
// backend is ok when JetStream answered within slowBackend, degraded when
// it answered later (the server still serves, slowly: status "degraded"),
// and unhealthy when it did not answer.
func (s *Service) Health(ctx context.Context) ojs.Health {
	h := ojs.Health{
		Status:        "ok",
		Version:       "1.0",
		UptimeSeconds: int64(s.now().Sub(s.started) / time.Second),
		Backend:       ojs.HealthBackend{Type: "nats-jetstream", Status: ojs.BackendOK, Server: s.nc.ConnectedUrlRedacted()},
	}
	ctx, cancel := context.WithTimeout(ctx, healthTimeout)
	defer cancel()
	start := time.Now()
	if _, err := s.js.AccountInfo(ctx); err != nil {
		h.Status = "degraded"
		h.Backend.Status = ojs.BackendUnhealthy
		h.Backend.Error = "JetStream did not answer: " + err.Error()
		if !s.nc.IsConnected() {
			h.Backend.Error = "not connected to NATS: " + err.Error()
		}
		return h
	}
	took := time.Since(start)
	h.Backend.LatencyMs = (took + time.Millisecond/2).Milliseconds()
	if took >= slowBackend {
		h.Status, h.Backend.Status = "degraded", ojs.BackendDegraded
	}
	return h
}

// readiness caches the last answer of Ready.
type readiness struct {
	mu   sync.Mutex
	at   time.Time
	last ojs.Readiness
}

// Ready reports whether this process can serve: it is connected, JetStream
// answers, and every stream and bucket of topology.Required exists. It
// costs one JetStream request (the list of stream names) and its answer is
// reused for readyTTL, so frequent probes stay cheap; concurrent probes
// wait for one check.
func (s *Service) Ready(ctx context.Context) ojs.Readiness {
	s.readyCache.mu.Lock()
	defer s.readyCache.mu.Unlock()
	if !s.readyCache.at.IsZero() && time.Since(s.readyCache.at) < readyTTL {
		return s.readyCache.last
	}
	r := s.checkReady(ctx)
	if ctx.Err() == nil { // a probe that went away says nothing about the backend
		s.readyCache.at, s.readyCache.last = time.Now(), r
	}
	return r
}

func (s *Service) checkReady(ctx context.Context) ojs.Readiness {
	if !s.nc.IsConnected() {
		return ojs.Readiness{Status: "unavailable", Reason: "not connected to NATS"}
	}
	ctx, cancel := context.WithTimeout(ctx, healthTimeout)
	defer cancel()
	have := map[string]bool{}
	names := s.js.StreamNames(ctx)
	for n := range names.Name() {
		have[n] = true
	}
	if err := names.Err(); err != nil {
		s.log.Warn("readiness: listing streams failed", "error", err)
		return ojs.Readiness{Status: "unavailable", Reason: "JetStream does not answer"}
	}
	var missing []string
	for _, n := range topology.Required() {
		if !have[n] {
			missing = append(missing, n)
		}
	}
	if len(missing) > 0 {
		return ojs.Readiness{Status: "unavailable", Missing: missing,
			Reason: fmt.Sprintf("JetStream streams or buckets are missing: %s", strings.Join(missing, ", "))}
	}
	return ojs.Readiness{Ready: true, Status: "ok"}
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
