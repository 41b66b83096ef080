package bench

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetgate/jetgate/cmd/jetgate/app"
)

// Raw baseline assets, on the same NATS server as jetgate's.
const (
	rawStream   = "BENCH_RAW"
	rawSubjects = "bench.raw.>"
	rawSubject  = "bench.raw.%d" // one subject (and consumer) per run
)

// EnvConfig says where the scenarios run.
type EnvConfig struct {
	// DataDir is where the embedded nats-server stores JetStream data
	// (required unless NatsURL is set).
	DataDir string
	// NatsURL, when set, is a NATS server both jetgate and the raw
	// baseline use instead of an embedded one.
	NatsURL string
	// URL, when set, is a running jetgate the HTTP paths talk to instead
	// of the in-process one.
	URL string
	// Conns is the number of keep-alive HTTP connections to keep (default 64).
	Conns int
	// NatsMonitor is the monitoring URL (e.g. http://127.0.0.1:8222) of
	// the server at NatsURL: the per-job cost reads its /varz and /jsz.
	// Without NatsURL the embedded server is read in-process.
	NatsMonitor string
	// NatsPID is the process id of the server at NatsURL when it runs on
	// this machine: its CPU is then read from /proc exactly instead of
	// estimated from /varz's cpu once a second.
	NatsPID int
	// JetgatePID is the process id of the jetgate at URL when it runs on
	// this machine: the cost scenario then reads its CPU from /proc, so
	// jetgate's CPU is told apart from the bench clients'.
	JetgatePID int
}

// Env is one jetgate server and the clients the workloads use against it:
// the admission service in-process (the Go path), HTTP, and a plain NATS
// connection with its own stream for the raw JetStream baseline.
type Env struct {
	srv     *app.Server
	nc      *nats.Conn
	js      jetstream.JetStream
	async   jetstream.JetStream // pipelined publishes
	raw     jetstream.Stream
	http    *http.Client
	httpURL string
	// mon reads the NATS server's counters (nil: they cannot be read).
	mon monitor
	// jetgatePID is a jetgate process serving URL (0: none).
	jetgatePID int
}

// Start starts jetgate in-process (with its embedded nats-server unless
// cfg.NatsURL is set), connects the raw baseline and creates its stream.
// Close stops it all.
func Start(ctx context.Context, cfg EnvConfig) (*Env, error) {
	if cfg.DataDir == "" && cfg.NatsURL == "" {
		return nil, fmt.Errorf("bench: a data dir or a NATS URL is needed")
	}
	srv, err := app.Start(ctx, app.Config{
		DataDir:  cfg.DataDir,
		NatsURL:  cfg.NatsURL,
		NatsAddr: "127.0.0.1:0",
		HTTPAddr: "127.0.0.1:0",
	}, nil)
	if err != nil {
		return nil, fmt.Errorf("start jetgate: %w", err)
	}
	e := &Env{srv: srv, httpURL: cmp.Or(cfg.URL, srv.URL()), jetgatePID: cfg.JetgatePID}
	switch {
	case srv.Embedded() != nil:
		e.mon = embeddedMonitor{ns: srv.Embedded().NATS()}
	case cfg.NatsMonitor != "":
		e.mon = newHTTPMonitor(cfg.NatsMonitor, cfg.NatsPID)
	}
	if err := e.connect(ctx, cmp.Or(cfg.NatsURL, srv.NatsURL()), cmp.Or(cfg.Conns, 64)); err != nil {
		e.Close()
		return nil, err
	}
	return e, nil
}

func (e *Env) connect(ctx context.Context, url string, conns int) error {
	nc, err := nats.Connect(url, nats.Name("jetgate bench raw baseline"))
	if err != nil {
		return fmt.Errorf("connect raw baseline: %w", err)
	}
	e.nc = nc
	if e.js, err = jetstream.New(nc); err != nil {
		return err
	}
	if e.async, err = jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(4096)); err != nil {
		return err
	}
	e.raw, err = e.js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name:      rawStream,
		Subjects:  []string{rawSubjects},
		Retention: jetstream.WorkQueuePolicy,
		Storage:   jetstream.FileStorage,
		// For the all-or-nothing batch baseline (RawAtomicBatch).
		AllowAtomicPublish: true,
	})
	if err != nil {
		return fmt.Errorf("create %s: %w", rawStream, err)
	}
	e.http = keepAliveClient(conns)
	return nil
}

// keepAliveClient is the bench's HTTP client: up to conns keep-alive
// connections to one host, a 30 s bound per request. Its owner closes the
// idle connections when done (CloseIdleConnections).
func keepAliveClient(conns int) *http.Client {
	tr := &http.Transport{MaxIdleConns: conns, MaxIdleConnsPerHost: conns, IdleConnTimeout: time.Minute}
	return &http.Client{Transport: tr, Timeout: 30 * time.Second}
}

// Server is the in-process jetgate.
func (e *Env) Server() *app.Server { return e.srv }

// Close deletes the raw baseline stream and stops jetgate; it is safe to
// call twice.
func (e *Env) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if e.http != nil {
		e.http.CloseIdleConnections()
	}
	if e.mon != nil {
		e.mon.close()
	}
	if e.nc != nil {
		if e.js != nil {
			_ = e.js.DeleteStream(ctx, rawStream)
		}
		e.nc.Close()
	}
	return e.srv.Shutdown(ctx)
}
