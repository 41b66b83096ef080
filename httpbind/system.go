package httpbind

import (
	"cmp"
	"maps"
	"math"
	"net/http"
	"slices"

	"github.com/jetgate/jetgate/admission/ojs"
)

// Extension URIs that switch manifest capabilities on.
const (
	// ExtPriority is the URI of the priority extension (ojs-priority.md).
	ExtPriority     = "urn:ojs:ext:priority"
	extRateLimiting = "urn:ojs:ext:rate-limiting"
)

// manifest is GET /ojs/manifest. It carries the fields of both
// ojs-http-binding.md 21 (ojs_version, capabilities, endpoints) and
// ojs-conformance.md 4 (specversion, conformance_tier). extensions is the
// flat list of URI strings the official clients decode (the legacy form
// conformance 4.2.1 allows).
type manifest struct {
	OJSVersion       string          `json:"ojs_version"`
	SpecVersion      string          `json:"specversion"`
	Implementation   implementation  `json:"implementation"`
	ConformanceLevel int             `json:"conformance_level"`
	ConformanceTier  string          `json:"conformance_tier"`
	Protocols        []string        `json:"protocols"`
	Backend          string          `json:"backend"`
	Capabilities     map[string]bool `json:"capabilities"`
	// UniqueJobStrength is "strong" when unique jobs are enforced
	// (ojs-conformance.md manifest, ojs-unique-jobs.md 8.3): one KV create
	// per key decides (admission/unique).
	UniqueJobStrength string            `json:"unique_job_strength,omitempty"`
	Extensions        []string          `json:"extensions"`
	Endpoints         map[string]string `json:"endpoints"`
	Defaults          manifestDefaults  `json:"defaults"`
}

type implementation struct {
	Name     string `json:"name"`
	Version  string `json:"version"`
	Language string `json:"language"`
	Backend  string `json:"backend"`
}

// manifestDefaults publishes server defaults a worker may want to know.
type manifestDefaults struct {
	VisibilityTimeoutMs int64 `json:"visibility_timeout_ms"`
	// The timeouts of ojs-timeouts.md 6, in seconds.
	Timeout          int64 `json:"timeout"`
	GracePeriod      int64 `json:"grace_period"`
	HeartbeatTimeout int64 `json:"heartbeat_timeout"`
}

const backendName = "nats-jetstream"

func newManifest(cfg Config) manifest {
	caps := defaultCapabilities(cfg.Extensions)
	maps.Copy(caps, cfg.Capabilities)
	strength := ""
	if caps["unique_jobs"] {
		strength = "strong"
	}
	return manifest{
		UniqueJobStrength: strength,
		OJSVersion:        ProtocolVersion,
		SpecVersion:       ojs.SpecVersion,
		Implementation: implementation{
			Name: cfg.ImplementationName, Version: cfg.ServerVersion, Language: "go", Backend: backendName,
		},
		ConformanceLevel: cfg.ConformanceLevel,
		ConformanceTier:  "runtime",
		Protocols:        []string{"http"},
		Backend:          backendName,
		Capabilities:     caps,
		Extensions:       append([]string{}, cfg.Extensions...),
		Endpoints: map[string]string{
			"base_url": "/ojs/v1",
			"manifest": "/ojs/manifest",
			"health":   "/ojs/v1/health",
		},
		Defaults: manifestDefaults{
			VisibilityTimeoutMs: cfg.DefaultHeartbeatTimeout.Milliseconds(),
			Timeout:             int64(math.Ceil(cfg.DefaultTimeout.Seconds())),
			GracePeriod:         int64(math.Ceil(max(cfg.DefaultGracePeriod, 0).Seconds())),
			HeartbeatTimeout:    int64(math.Ceil(cfg.DefaultHeartbeatTimeout.Seconds())),
		},
	}
}

// defaultCapabilities declares what httpbind serves itself (batch, dead
// letter, pause/resume; no cron, workflows or schemas), what ojs.ParseJob
// accepts and enforces (delayed jobs, expires_at), unique jobs (admission/unique), and the extension-backed
// flags when their URI is listed. Config.Capabilities overrides any of them.
func defaultCapabilities(ext []string) map[string]bool {
	return map[string]bool{
		"batch_enqueue":     true,
		"dead_letter":       true,
		"pause_resume":      true,
		"delayed_jobs":      true,
		"job_ttl":           true,
		"unique_jobs":       true,
		"priority_queues":   slices.Contains(ext, ExtPriority),
		"rate_limiting":     slices.Contains(ext, extRateLimiting),
		"backpressure":      slices.Contains(ext, ExtBackpressure),
		"cron_jobs":         false, // true when Backend is a CronBackend (cron.go)
		"workflows":         false,
		"schema_validation": false,
	}
}

// getManifest is GET /ojs/manifest (ojs-http-binding.md 21).
func (s *server) getManifest(w http.ResponseWriter, r *http.Request) {
	s.writeJSON(w, r, http.StatusOK, s.manifest)
}

// health is GET /ojs/v1/health (8.1): 200 while the server serves (status
// "ok", or "degraded" when JetStream answers slowly, as ojs-observability.md
// 10.1 has it), 503 with the same body shape when the backend is unhealthy.
// backend.status is "ok", "degraded" or "unhealthy"; backend.latency_ms an
// integer.
func (s *server) health(w http.ResponseWriter, r *http.Request) {
	h := s.b.Health(r.Context())
	if h.Version == "" {
		h.Version = s.cfg.ServerVersion
	}
	status := http.StatusOK
	if h.Status != "ok" && h.Backend.Status != ojs.BackendDegraded {
		status = http.StatusServiceUnavailable
		if h.Status == "" {
			h.Status = "degraded"
		}
	}
	s.writeJSON(w, r, status, h)
}

// probeRoutes are the process probes outside the OJS base path: GET
// /health (liveness) and GET /ready (readiness), for load balancers and
// orchestrators. Like every route they echo the client's X-Request-Id.
func (s *server) probeRoutes() []route {
	return []route{
		{http.MethodGet, "/health", s.live, s.cfg.MaxBodyBytes},
		{http.MethodGet, "/ready", s.ready, s.cfg.MaxBodyBytes},
	}
}

// live is GET /health: 200 {"status":"ok"} whenever the process serves
// HTTP. It asks the backend nothing, so a slow or lost JetStream does not
// get a healthy process restarted; /ready reports that.
func (s *server) live(w http.ResponseWriter, r *http.Request) {
	s.writeJSON(w, r, http.StatusOK, struct {
		Status string `json:"status"`
	}{"ok"})
}

// ready is GET /ready: 200 {"status":"ok"} when JetStream answers and
// jetgate's streams and buckets exist, else 503 {"status":"unavailable",
// "reason", "missing"?} with Retry-After.
func (s *server) ready(w http.ResponseWriter, r *http.Request) {
	rd := s.b.Ready(r.Context())
	if rd.Ready {
		rd.Status = cmp.Or(rd.Status, "ok")
		s.writeJSON(w, r, http.StatusOK, rd)
		return
	}
	rd.Status = cmp.Or(rd.Status, "unavailable")
	w.Header().Set("Retry-After", "1")
	s.writeJSON(w, r, http.StatusServiceUnavailable, rd)
}
