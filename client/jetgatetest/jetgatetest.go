package jetgatetest

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetgate/jetgate/client"
	"github.com/jetgate/jetgate/cmd/jetgate/app"
	"github.com/jetgate/jetgate/jetstream/natstest"
)

// startTimeout bounds Start; a loaded CI machine is slow, a healthy one
// is ready in tens of milliseconds.
const startTimeout = 30 * time.Second

// Server is a running in-process jetgate and a connection to its NATS.
type Server struct {
	// NatsURL is the embedded nats-server's client URL (nats://127.0.0.1:port).
	NatsURL string
	// NatsAuth makes a NATS connection authenticate as jetgate's own does:
	// give it to nats.Connect with NatsURL. With access control on
	// (WithToken) the embedded server requires the nkey seed of
	// NatsSeedFile, as `jetgate serve` does; otherwise NatsAuth changes
	// nothing and NatsSeedFile is "".
	NatsAuth     nats.Option
	NatsSeedFile string
	// HTTPURL is the base URL of the OJS HTTP API (http://127.0.0.1:port).
	HTTPURL string
	// Conn is a NATS connection for the test, closed by t.Cleanup.
	Conn *nats.Conn
	// JetStream is a JetStream context on Conn.
	JetStream jetstream.JetStream
	// Client is a jetgate client over the NATS binding (on Conn);
	// HTTPClient is one over the HTTP binding. Both send the admin token
	// given with WithToken, if any.
	Client, HTTPClient *client.Client
	// App is the jetgate server itself (admission service, embedded
	// nats-server, shutdown).
	App *app.Server
}

type settings struct {
	cfg   app.Config
	log   *slog.Logger
	token string
}

// Option changes how Start runs jetgate.
type Option func(*settings)

// WithConfig changes jetgate's configuration before it starts (tokens,
// timeouts, queue bounds ...). DataDir, NatsAddr and HTTPAddr are set by
// Start unless the function sets them; NatsURL makes jetgate use that
// NATS server instead of an embedded one.
func WithConfig(f func(*app.Config)) Option {
	return func(s *settings) { f(&s.cfg) }
}

// WithToken turns jetgate's access control on with token as an admin
// bearer token, and makes the kit's clients send it.
func WithToken(token string) Option {
	return func(s *settings) {
		s.cfg.AdminTokens = append(s.cfg.AdminTokens, token)
		s.token = token
	}
}

// WithLogger sends jetgate's logs to log; by default its errors go to
// t.Log while the test runs.
func WithLogger(log *slog.Logger) Option {
	return func(s *settings) { s.log = log }
}

// Start runs jetgate (and its embedded nats-server) for the test and
// returns once it serves HTTP and NATS. It fails the test if it cannot.
func Start(t testing.TB, opts ...Option) *Server {
	t.Helper()
	st := settings{cfg: app.Config{
		DataDir:  t.TempDir(),
		NatsAddr: "127.0.0.1:0",
		HTTPAddr: "127.0.0.1:0",
	}}
	var lw *natstest.LogWriter
	for _, o := range opts {
		o(&st)
	}
	if st.log == nil {
		lw = natstest.NewLogWriter(t)
		st.log = slog.New(slog.NewTextHandler(lw, &slog.HandlerOptions{Level: slog.LevelError}))
	}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	a, err := app.Start(ctx, st.cfg, st.log)
	if err != nil {
		t.Fatalf("jetgatetest: start jetgate: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := a.Shutdown(ctx); err != nil {
			t.Logf("jetgatetest: shutdown: %v", err)
		}
	})
	if lw != nil {
		t.Cleanup(lw.Stop) // registered after Shutdown, runs before it: no logging after the test
	}
	s := &Server{HTTPURL: a.URL(), App: a, NatsURL: natsURL(a, st.cfg), NatsAuth: a.NatsAuth(), NatsSeedFile: a.NatsSeedFile()}
	s.Conn, err = nats.Connect(s.NatsURL, nats.Name("jetgatetest "+t.Name()), s.NatsAuth)
	if err != nil {
		t.Fatalf("jetgatetest: connect to %s: %v", s.NatsURL, err)
	}
	t.Cleanup(s.Conn.Close)
	if s.JetStream, err = jetstream.New(s.Conn); err != nil {
		t.Fatalf("jetgatetest: jetstream: %v", err)
	}
	if s.Client, err = client.New(client.Config{Conn: s.Conn, Token: st.token}); err != nil {
		t.Fatalf("jetgatetest: NATS client: %v", err)
	}
	if s.HTTPClient, err = client.New(client.Config{URL: s.HTTPURL, Token: st.token}); err != nil {
		t.Fatalf("jetgatetest: HTTP client: %v", err)
	}
	t.Cleanup(s.HTTPClient.Close)
	return s
}

// natsURL is the URL clients use: the embedded server's, or the one
// jetgate was pointed at.
func natsURL(a *app.Server, cfg app.Config) string {
	if e := a.Embedded(); e != nil {
		return e.ClientURL()
	}
	return cfg.NatsURL
}
