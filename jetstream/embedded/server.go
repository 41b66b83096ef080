package embedded

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

const (
	// DefaultAddr is where the embedded server listens unless told otherwise.
	DefaultAddr = "127.0.0.1:4222"
	// DefaultServerName names the server in logs and monitoring.
	DefaultServerName = "jetgate"
	// DefaultMaxPayload is the server's max_payload: 2 MiB, twice NATS's
	// default, so that a job envelope of 1 MiB (ojs-json-format.md 8.1
	// MUST) fits jetgate's record budget (ojs.PayloadLimits: a job may
	// take max_payload less a reserve of max_payload/16, 1920 KiB here)
	// with room left for its result, errors and progress, and so that
	// every NATS message made of such a job (its ready message, its
	// record, a reply carrying it) fits too.
	DefaultMaxPayload = 2 << 20
	// defaultStartTimeout bounds Start when ctx has no deadline.
	defaultStartTimeout = 30 * time.Second
)

// Config configures the embedded server.
type Config struct {
	// DataDir holds the JetStream store (under DataDir/jetstream). Created
	// if missing. Required.
	DataDir string
	// Addr is host:port to listen on for clients, DefaultAddr if empty.
	// Port 0 picks a free port; see Server.ClientURL.
	Addr string
	// ServerName defaults to DefaultServerName.
	ServerName string
	// MaxPayload is the largest message the server accepts (NATS's
	// max_payload), DefaultMaxPayload if 0.
	MaxPayload int32
	// MaxMemory and MaxStore cap JetStream memory and file storage in
	// bytes; 0 keeps nats-server's defaults (a share of RAM and disk).
	MaxMemory, MaxStore int64
	// Logger receives the server's log lines as they are (add attributes
	// such as component=nats-server with With); nil discards them.
	Logger *slog.Logger
	// Debug forwards nats-server's debug lines (at slog Debug level).
	Debug bool
	// Token, when set, is required of every client connection (NATS
	// token authentication); clients pass it with nats.Token.
	Token string
	// NKeySeedFile, when set, names a file holding an nkey user seed: the
	// server then accepts only clients that prove they hold it (nkey
	// challenge authentication; the seed never travels), with every
	// permission. Clients pass the file to nats.NkeyOptionFromSeed, the
	// nats CLI to --nkey. The file must not be readable by group or
	// others. At most one of Token and NKeySeedFile.
	NKeySeedFile string
	// CreateNKeySeed creates NKeySeedFile with a new user seed, mode 0600,
	// when it does not exist (under the data dir's lock).
	CreateNKeySeed bool
}

func (c Config) withDefaults() Config {
	c.Addr = cmp.Or(c.Addr, DefaultAddr)
	c.ServerName = cmp.Or(c.ServerName, DefaultServerName)
	c.MaxPayload = cmp.Or(c.MaxPayload, DefaultMaxPayload)
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

func (c Config) validate() error {
	if c.DataDir == "" {
		return errors.New("embedded: DataDir is required")
	}
	if c.MaxMemory < 0 || c.MaxStore < 0 {
		return errors.New("embedded: MaxMemory and MaxStore must not be negative")
	}
	if c.MaxPayload < 0 {
		return errors.New("embedded: MaxPayload must not be negative")
	}
	if c.Token != "" && c.NKeySeedFile != "" {
		return errors.New("embedded: Token and NKeySeedFile exclude each other: choose one way clients authenticate")
	}
	if c.CreateNKeySeed && c.NKeySeedFile == "" {
		return errors.New("embedded: CreateNKeySeed needs NKeySeedFile")
	}
	return nil
}

// options turns the config into nats-server options.
func (c Config) options() (*server.Options, error) {
	host, portStr, err := net.SplitHostPort(c.Addr)
	if err != nil {
		return nil, fmt.Errorf("embedded: parse addr %q: %w", c.Addr, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || port < 0 || port > 65535 {
		return nil, fmt.Errorf("embedded: parse addr %q: bad port %q", c.Addr, portStr)
	}
	if port == 0 {
		port = server.RANDOM_PORT // nats-server reads 0 as its default, 4222.
	}
	return &server.Options{
		ServerName: c.ServerName,
		Host:       host,
		Port:       port,
		JetStream:  true,
		StoreDir:   c.DataDir,
		// 0 would also mean "default" here, but be explicit.
		JetStreamMaxMemory: cmp.Or(c.MaxMemory, -1),
		JetStreamMaxStore:  cmp.Or(c.MaxStore, -1),
		MaxPayload:         c.MaxPayload,
		NoSigs:             true,
		Authorization:      c.Token,
		Debug:              c.Debug,
		// ASCII art does not belong in structured logs.
		DisableJetStreamBanner: true,
	}, nil
}

// Server is a running embedded nats-server.
type Server struct {
	ns   *server.Server
	lock *os.File
	once sync.Once
}

// Start starts the server and returns once it accepts connections, or an
// error. ctx bounds the start (30 s if it has no deadline); cancelling ctx
// later does not stop the server: call Shutdown.
func Start(ctx context.Context, cfg Config) (*Server, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	opts, err := cfg.options()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.DataDir, 0o750); err != nil {
		return nil, fmt.Errorf("embedded: create data dir: %w", err)
	}
	lock, err := lockDir(cfg.DataDir)
	if err != nil {
		return nil, fmt.Errorf("embedded: %w", err)
	}
	if cfg.NKeySeedFile != "" {
		pub, err := userKey(cfg.NKeySeedFile, cfg.CreateNKeySeed)
		if err != nil {
			lock.Close()
			return nil, err
		}
		opts.Nkeys = []*server.NkeyUser{{Nkey: pub}}
	}
	ns, err := startServer(ctx, opts, cfg)
	if err != nil {
		lock.Close()
		return nil, err
	}
	return &Server{ns: ns, lock: lock}, nil
}

func startServer(ctx context.Context, opts *server.Options, cfg Config) (*server.Server, error) {
	ns, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("embedded: new server: %w", err)
	}
	logger := &slogLogger{log: cfg.Logger}
	ns.SetLoggerV2(logger, cfg.Debug, false, false)

	// Start listens synchronously; failures surface through Fatalf.
	ns.Start()
	if err := logger.fatalErr(); err != nil {
		shutdown(ns)
		return nil, fmt.Errorf("embedded: start nats-server: %w", err)
	}
	timeout := defaultStartTimeout
	if deadline, ok := ctx.Deadline(); ok {
		timeout = time.Until(deadline)
	}
	if !ns.ReadyForConnections(timeout) {
		shutdown(ns)
		err := cmp.Or(logger.fatalErr(), ctx.Err(), errors.New("timed out"))
		return nil, fmt.Errorf("embedded: nats-server not ready: %w", err)
	}
	return ns, nil
}

// ClientURL is the URL clients connect to, e.g. nats://127.0.0.1:4222, with
// the actual port when Config.Addr asked for port 0. An unspecified listen
// host (0.0.0.0, ::, empty) becomes the loopback address.
func (s *Server) ClientURL() string {
	u, err := url.Parse(s.ns.ClientURL())
	if err != nil {
		return s.ns.ClientURL()
	}
	host, port := u.Hostname(), u.Port()
	switch ip := net.ParseIP(host); {
	case host == "":
		host = "127.0.0.1"
	case ip != nil && ip.IsUnspecified() && ip.To4() != nil:
		host = "127.0.0.1"
	case ip != nil && ip.IsUnspecified():
		host = "::1"
	}
	u.Host = net.JoinHostPort(host, port)
	return u.String()
}

// NATS returns the underlying nats-server, for in-process connections
// (nats.InProcessServer) and tests.
func (s *Server) NATS() *server.Server { return s.ns }

// Listening reports whether a message published on subject now would
// reach any subscriber: a client's subscription, a stream or consumer of
// JetStream, or an internal one of the server. The embedded server runs
// alone (no routes, gateways or leaf nodes) with one account for its
// clients, so its global account's subscription list knows every
// listener, and the answer is exact. A subscription registered after the
// call may miss the message, as it would miss one published just before
// it. Its cost is a lookup in the server's cache of matches.
func (s *Server) Listening(subject string) bool {
	return s.ns.GlobalAccount().SubscriptionInterest(subject)
}

// Shutdown stops the server gracefully, waits until it is down, and
// releases the data dir. Safe to call more than once.
func (s *Server) Shutdown() {
	s.once.Do(func() {
		shutdown(s.ns)
		s.lock.Close()
	})
}

func shutdown(ns *server.Server) {
	ns.Shutdown()
	ns.WaitForShutdown()
}
