// Package app assembles a jetgate server from its parts: the embedded
// nats-server (or a connection to an existing one), the JetStream assets,
// the admission service, events, metrics and the HTTP binding. `jetgate
// serve` runs it; end-to-end tests and benchmarks start it in-process.
package app

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"go.opentelemetry.io/otel/trace"

	"github.com/jetgate/jetgate/admission"
	"github.com/jetgate/jetgate/admission/admin"
	"github.com/jetgate/jetgate/admission/authz"
	"github.com/jetgate/jetgate/admission/cron"
	"github.com/jetgate/jetgate/admission/metrics"
	"github.com/jetgate/jetgate/admission/pools"
	"github.com/jetgate/jetgate/admission/workers"
	"github.com/jetgate/jetgate/admission/workflow"
	"github.com/jetgate/jetgate/httpbind"
	"github.com/jetgate/jetgate/httpbind/dashboard"
	"github.com/jetgate/jetgate/jetstream/embedded"
	"github.com/jetgate/jetgate/jetstream/events"
	"github.com/jetgate/jetgate/jetstream/topology"
	"github.com/jetgate/jetgate/natsbind"
)

// DefaultVersion is Version when the build sets none.
const DefaultVersion = "0.1.0-dev"

// Version is jetgate's version, set with -ldflags "-X ...app.Version=v1.2.3"
// (or -X main.version, which the jetgate command copies here).
var Version = DefaultVersion

// Extensions lists the OJS extension URIs jetgate implements in full. The
// manifest declares exactly these.
var Extensions = []string{
	"urn:ojs:ext:rate-limiting", httpbind.ExtBackpressure, httpbind.ExtPriority, "urn:ojs:ext:timeouts",
	"urn:ojs:ext:progress", httpbind.ExtFairScheduling, httpbind.ExtAdminAPI,
}

// ConformanceLevel is the OJS conformance level jetgate declares
// (ojs-conformance.md 2): level 2 (delayed jobs, cron in IANA zones with
// overlap prevented by default, expires_at) and level 3 (chain, group,
// batch with callbacks, data passing, workflow events) are served. Level
// 4 is not declared: L4-PRI-002/003 ask for "higher number runs first"
// and named levels HIGH=3/LOW=1, the opposite of the priority extension
// jetgate implements (lower runs first; spec/README.md decision 1).
const ConformanceLevel = 3

// Server is one running jetgate process.
type Server struct {
	cfg Config
	log *slog.Logger

	ns      *embedded.Server
	nc      *nats.Conn
	js      jetstream.JetStream
	svc     *admission.Service
	workers *workers.Registry
	pools   *pools.Pools
	cron    *cron.Scheduler
	flows   *workflow.Engine
	events  *events.Publisher
	metrics *metrics.Metrics
	// tracer records the bindings' spans (nil: none); stopTracer flushes it.
	tracer     trace.TracerProvider
	stopTracer func(context.Context) error
	httpSrv    *http.Server
	ln         net.Listener
	certs      *certReloader        // nil without --tls-cert
	natsAPI    *natsbind.Service    // nil with NoNatsAPI
	dash       *dashboard.Dashboard // nil with --dashboard=false
	served     chan error
	// keys are the bearer tokens (nil: access control off); seedFile the
	// nkey seed the embedded server requires ("" if none, natsauth.go);
	// auth the options jetgate's NATS connection authenticates with.
	keys     *authz.Keyring
	seedFile string
	auth     []nats.Option

	stopOnce sync.Once
}

// Start brings up a jetgate server and returns once it serves HTTP.
func Start(ctx context.Context, cfg Config, log *slog.Logger) (*Server, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{cfg: cfg, log: log, served: make(chan error, 1)}
	if err := s.start(ctx); err != nil {
		s.kill()
		return nil, err
	}
	return s, nil
}

func (s *Server) start(ctx context.Context) error {
	tp, stop, err := s.tracerProvider()
	if err != nil {
		return err
	}
	s.tracer, s.stopTracer = tp, stop
	if s.keys, err = s.cfg.keyring(); err != nil {
		return err
	}
	url := s.cfg.NatsURL
	if url == "" {
		ec := embedded.Config{DataDir: s.cfg.DataDir, Addr: s.cfg.NatsAddr, Logger: s.log.With("component", "nats-server")}
		s.cfg.embeddedAuth(&ec, s.keys)
		ns, err := embedded.Start(ctx, ec)
		if err != nil {
			return fmt.Errorf("start embedded nats-server: %w", err)
		}
		s.ns, s.seedFile = ns, ec.NKeySeedFile
		url = ns.ClientURL()
		s.log.Info("embedded nats-server ready", "url", url, "data_dir", s.cfg.DataDir)
		s.logNatsAuth(url)
	}
	opts, err := s.natsOptions()
	if err != nil {
		return err
	}
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		return fmt.Errorf("connect to NATS at %s: %w", url, err)
	}
	s.nc = nc
	if err := s.checkBodyLimit(); err != nil {
		return err
	}
	s.js, err = jetstream.New(nc)
	if err != nil {
		return fmt.Errorf("jetstream: %w", err)
	}
	assets, err := topology.Ensure(ctx, s.js, topology.Config{Replicas: s.cfg.Replicas,
		RecordMarkers: min(topology.DefaultRecordMarkers, s.cfg.Retention)})
	if err != nil {
		return err
	}
	instance := s.instance()
	evCfg := s.cfg.eventsConfig("ojs://jetgate/"+instance, s.log)
	if s.ns != nil {
		// Events nobody listens to are not sent to the embedded server.
		evCfg.Listening = s.ns.Listening
	}
	s.events, err = events.New(nc, s.js, evCfg)
	if err != nil {
		return err
	}
	if err := s.events.Ensure(ctx); err != nil {
		return err
	}
	s.metrics, err = metrics.New(metrics.Config{InstanceID: instance, Version: Version, RuntimeMetrics: true})
	if err != nil {
		return err
	}
	if err := s.startWorkers(ctx, assets); err != nil {
		return err
	}
	s.svc, err = admission.New(nc, s.js, assets, admission.Config{
		Workers:                 s.workers,
		DefaultHeartbeatTimeout: s.cfg.DefaultHeartbeatTimeout,
		DefaultTimeout:          s.cfg.DefaultTimeout,
		DefaultGracePeriod:      s.cfg.DefaultGracePeriod,
		ClaimAckWait:            s.cfg.ClaimAckWait,
		Retention:               s.cfg.Retention,
		DeadRetention:           s.cfg.DeadRetention,
		DefaultBackpressure:     s.cfg.backpressure(),
		MaxBlockTimeout:         s.cfg.MaxBlockTimeout,
		MaxFetch:                s.cfg.MaxFetchCount,
		Logger:                  s.log.With("component", "admission"),
		Events:                  s.events,
		Metrics:                 s.metrics,
		Version:                 Version,
		Hooks:                   s.hooks(assets),
	})
	if err != nil {
		return err
	}
	if err := s.svc.Start(ctx); err != nil {
		return err
	}
	if err := s.startHooks(ctx); err != nil {
		return err
	}
	if s.pools, err = pools.New(s.svc, s.workers); err != nil {
		return err
	}
	if err := s.startCron(ctx, assets); err != nil {
		return err
	}
	s.metrics.SetStateDepthFunc(s.svc.StateDepths)
	s.metrics.SetPriorityDepthFunc(s.svc.PriorityDepths)
	s.metrics.SetHeartbeatAgeFunc(s.svc.HeartbeatAges)
	s.metrics.SetRateLimitFunc(func(context.Context) map[string]metrics.RateLimitUsage {
		out := map[string]metrics.RateLimitUsage{}
		for k, u := range s.svc.RateLimitUsage() {
			out[k] = metrics.RateLimitUsage{Active: int64(u[0]), Waiting: int64(u[1])}
		}
		return out
	})
	return s.serveHTTP()
}

// checkBodyLimit refuses a body limit above what the NATS server carries
// (issue 31): a request body over the server's max_payload could never be
// stored, so the HTTP limit is capped at it, and a --max-body-bytes above
// it is a mistake to report at start rather than a 500 on every such
// request.
func (s *Server) checkBodyLimit() error {
	if mp := s.nc.MaxPayload(); s.cfg.MaxBodyBytes > mp {
		return fmt.Errorf("--max-body-bytes (JETGATE_MAX_BODY_BYTES) is %d bytes, above the NATS server's max_payload of %d bytes: "+
			"set it to %d or less, or raise max_payload in the NATS server's configuration", s.cfg.MaxBodyBytes, mp, mp)
	}
	return nil
}

// startWorkers starts the worker registry (admission/workers); a worker
// not seen within the heartbeat timeout is stale.
func (s *Server) startWorkers(ctx context.Context, assets *topology.Assets) error {
	var err error
	s.workers, err = workers.New(assets.Workers, workers.Config{
		StaleAfter: s.cfg.DefaultHeartbeatTimeout,
		Logger:     s.log.With("component", "workers"),
		Events:     s.events,
	})
	if err != nil {
		return err
	}
	return s.workers.Start(ctx)
}

// startCron starts the cron scheduler (admission/cron), which enqueues
// through the admission service.
func (s *Server) startCron(ctx context.Context, assets *topology.Assets) error {
	var err error
	s.cron, err = cron.New(s.svc, s.js, assets, cron.Config{Logger: s.log.With("component", "cron"), Events: s.events})
	if err != nil {
		return err
	}
	return s.cron.Start(ctx)
}

func (s *Server) serveHTTP() error {
	adm, err := admin.New(s.svc, s.svc.Store(), admin.Config{DeadRetention: s.cfg.DeadRetention, Workers: s.workers})
	if err != nil {
		return err
	}
	keys := s.keys
	if keys == nil {
		s.log.Warn("HTTP access control off: no bearer tokens configured, every request is served (see --auth-tokens-file)")
	} else {
		n := keys.Count()
		s.log.Info("HTTP access control on", "producer_tokens", n[authz.RoleProducer],
			"worker_tokens", n[authz.RoleWorker], "admin_tokens", n[authz.RoleAdmin])
	}
	b := backend{s.svc, adm, s.workers, s.pools, s.cron, s.flows}
	if err := s.startNatsAPI(b, keys); err != nil {
		return err
	}
	h, err := httpbind.New(b, httpbind.Config{
		Auth:                    keys,
		MaxBodyBytes:            s.cfg.MaxBodyBytes,
		MaxFetchCount:           s.cfg.MaxFetchCount,
		Logger:                  s.log.With("component", "http"),
		TracerProvider:          s.tracer,
		Extensions:              Extensions,
		ConformanceLevel:        ConformanceLevel,
		ServerVersion:           Version,
		MetricsHandler:          s.metrics.Handler(),
		DefaultHeartbeatTimeout: s.cfg.DefaultHeartbeatTimeout,
		DefaultTimeout:          s.cfg.DefaultTimeout,
		DefaultGracePeriod:      s.cfg.DefaultGracePeriod,
	})
	if err != nil {
		return err
	}
	handler, err := s.mountDashboard(h, b, keys)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", s.cfg.HTTPAddr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", s.cfg.HTTPAddr, err)
	}
	if s.cfg.TLSCert != "" {
		r, err := newCertReloader(s.cfg.TLSCert, s.cfg.TLSKey)
		if err != nil {
			ln.Close()
			return err
		}
		s.certs = r
		ln = tls.NewListener(ln, r.tlsConfig())
	}
	s.ln = ln
	s.httpSrv = &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
	if sc, ok := h.(httpbind.StreamCloser); ok {
		s.httpSrv.RegisterOnShutdown(sc.CloseStreams)
	}
	s.httpSrv.RegisterOnShutdown(s.stopDashboard)
	go func() { s.served <- s.httpSrv.Serve(ln) }()
	s.log.Info("jetgate serving", "http", s.URL(), "nats", s.NatsURL(), "version", Version)
	return nil
}

func (s *Server) instance() string {
	if s.cfg.InstanceName != "" {
		return s.cfg.InstanceName
	}
	h, err := os.Hostname()
	if err != nil || h == "" {
		return "jetgate"
	}
	return h
}

func (s *Server) natsOptions() ([]nats.Option, error) {
	opts := []nats.Option{
		nats.Name("jetgate " + s.instance()),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250 * time.Millisecond),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil {
				s.log.Warn("NATS disconnected", "error", err)
			}
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) { s.log.Info("NATS reconnected", "url", nc.ConnectedUrlRedacted()) }),
	}
	auth, err := s.authOptions()
	if err != nil {
		return nil, err
	}
	s.auth = auth
	return append(opts, auth...), nil
}

// HTTPAddr is the address the HTTP API listens on.
func (s *Server) HTTPAddr() string { return s.ln.Addr().String() }

// URL is the HTTP API's base URL.
func (s *Server) URL() string {
	if s.certs != nil {
		return "https://" + s.HTTPAddr()
	}
	return "http://" + s.HTTPAddr()
}

// ReloadTLS reads the HTTP listener's certificate and key files again
// (jetgate serve calls it on SIGHUP); new connections get the new
// certificate, the listener stays. Without TLS it does nothing. On error
// the current certificate stays.
func (s *Server) ReloadTLS() error {
	if s.certs == nil {
		return nil
	}
	return s.certs.Reload()
}

// NatsURL is the NATS server jetgate uses.
func (s *Server) NatsURL() string { return s.nc.ConnectedUrlRedacted() }

// Service is the admission service, for in-process callers (Go API).
func (s *Server) Service() *admission.Service { return s.svc }

// Embedded is the embedded nats-server, or nil when jetgate runs on
// --nats-url. `jetgate bench` reads its monitoring counters (Varz, Jsz)
// in-process through it.
func (s *Server) Embedded() *embedded.Server { return s.ns }

// Shutdown stops gracefully: answer the producers blocked on full queues
// (503 with Retry-After, nothing admitted for them), stop accepting HTTP
// and NATS requests, finish in-flight requests, stop the admission
// service, flush and close the NATS connection, then stop the embedded
// server. Safe to call twice.
func (s *Server) Shutdown(ctx context.Context) error {
	var err error
	s.stopOnce.Do(func() {
		// First: a blocked producer otherwise holds both bindings' drains
		// until its block timeout, past ctx (issue 31 item 6).
		if s.svc != nil {
			s.svc.EndBlocking()
		}
		s.stopNatsAPI()
		if s.httpSrv != nil {
			if e := s.httpSrv.Shutdown(ctx); e != nil {
				err = fmt.Errorf("http shutdown: %w", e)
			}
		}
		s.stopDashboard()
		if s.cron != nil {
			s.cron.Stop()
		}
		s.stopHooks()
		if s.svc != nil {
			s.svc.Stop()
		}
		if s.workers != nil {
			s.workers.Stop()
		}
		s.events.Close()
		if s.metrics != nil {
			_ = s.metrics.Shutdown(ctx)
		}
		if s.stopTracer != nil {
			_ = s.stopTracer(ctx)
		}
		if s.nc != nil {
			if e := s.nc.FlushWithContext(ctx); e != nil && err == nil && !errors.Is(e, nats.ErrConnectionClosed) {
				err = fmt.Errorf("flush NATS: %w", e)
			}
			s.nc.Close()
		}
		if s.ns != nil {
			s.ns.Shutdown()
		}
		s.log.Info("jetgate stopped")
	})
	return err
}

// Kill stops at once, as a crash would: no HTTP draining, no flush. The
// embedded server, if any, is shut down so its port and files are freed.
func (s *Server) Kill() { s.stopOnce.Do(s.kill) }

func (s *Server) kill() {
	if s.natsAPI != nil {
		s.natsAPI.Kill()
	}
	if s.ln != nil {
		_ = s.httpSrv.Close()
	}
	s.stopDashboard()
	if s.cron != nil {
		s.cron.Stop()
	}
	s.stopHooks()
	if s.svc != nil {
		s.svc.Kill()
	}
	if s.workers != nil {
		s.workers.Stop()
	}
	s.events.Close()
	if s.nc != nil {
		s.nc.Close()
	}
	if s.ns != nil {
		s.ns.Shutdown()
	}
}

// Run starts jetgate and serves until ctx is cancelled (SIGINT/SIGTERM),
// then shuts down gracefully within cfg.ShutdownTimeout.
func Run(ctx context.Context, cfg Config, log *slog.Logger) error {
	s, err := Start(ctx, cfg, log)
	if err != nil {
		return err
	}
	return s.Wait(ctx)
}

// Wait serves until ctx is done, then shuts down gracefully within the
// shutdown timeout; it returns early if the HTTP server fails.
func (s *Server) Wait(ctx context.Context) error {
	select {
	case <-ctx.Done():
		s.log.Info("shutting down", "timeout", s.cfg.ShutdownTimeout)
	case err := <-s.served:
		s.Kill()
		return fmt.Errorf("http server: %w", err)
	}
	sctx, cancel := context.WithTimeout(context.Background(), s.cfg.ShutdownTimeout)
	defer cancel()
	return s.Shutdown(sctx)
}
