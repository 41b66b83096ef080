package embedded_test

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"

	"github.com/jetgate/jetgate/jetstream/embedded"
)

func testContext(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func start(t *testing.T, cfg embedded.Config) *embedded.Server {
	t.Helper()
	cfg.Addr = cmp.Or(cfg.Addr, "127.0.0.1:0")
	s, err := embedded.Start(testContext(t), cfg)
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	t.Cleanup(s.Shutdown)
	return s
}

func connect(t *testing.T, s *embedded.Server) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		t.Fatalf("connect %s: %v", s.ClientURL(), err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatalf("jetstream: %v", err)
	}
	return js
}

func TestStartJetStream(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	s := start(t, embedded.Config{DataDir: filepath.Join(t.TempDir(), "new", "dir")})
	js := connect(t, s)

	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "B"})
	if err != nil {
		t.Fatalf("create bucket: %v", err)
	}
	if _, err := kv.Create(ctx, "k", []byte("v")); err != nil {
		t.Fatalf("kv create: %v", err)
	}
	info, err := js.AccountInfo(ctx)
	if err != nil {
		t.Fatalf("account info: %v", err)
	}
	if info.Streams != 1 {
		t.Fatalf("streams = %d, want 1", info.Streams)
	}
}

func TestDataSurvivesRestart(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	dir := t.TempDir()

	s := start(t, embedded.Config{DataDir: dir})
	js := connect(t, s)
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "S", Subjects: []string{"s.>"}}); err != nil {
		t.Fatalf("create stream: %v", err)
	}
	if _, err := js.Publish(ctx, "s.1", []byte("kept")); err != nil {
		t.Fatalf("publish: %v", err)
	}
	s.Shutdown()
	s.Shutdown() // Safe twice.

	s2 := start(t, embedded.Config{DataDir: dir})
	st, err := connect(t, s2).Stream(ctx, "S")
	if err != nil {
		t.Fatalf("stream after restart: %v", err)
	}
	msg, err := st.GetLastMsgForSubject(ctx, "s.1")
	if err != nil {
		t.Fatalf("get after restart: %v", err)
	}
	if string(msg.Data) != "kept" {
		t.Fatalf("data after restart = %q, want kept", msg.Data)
	}
}

func TestDataDirLocked(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	start(t, embedded.Config{DataDir: dir})

	_, err := embedded.Start(testContext(t), embedded.Config{DataDir: dir, Addr: "127.0.0.1:0"})
	if !errors.Is(err, embedded.ErrDataDirLocked) {
		t.Fatalf("second start on same dir: err = %v, want ErrDataDirLocked", err)
	}
}

func TestAddrInUse(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()

	begin := time.Now()
	_, err = embedded.Start(testContext(t), embedded.Config{DataDir: t.TempDir(), Addr: l.Addr().String()})
	if err == nil || !strings.Contains(err.Error(), "listen") {
		t.Fatalf("start on busy port: err = %v, want a listen error", err)
	}
	if d := time.Since(begin); d > 5*time.Second {
		t.Fatalf("start on busy port took %s", d)
	}
}

func TestConfigErrors(t *testing.T) {
	t.Parallel()
	for name, cfg := range map[string]embedded.Config{
		"no data dir":          {Addr: "127.0.0.1:0"},
		"no port":              {DataDir: t.TempDir(), Addr: "127.0.0.1"},
		"bad port":             {DataDir: t.TempDir(), Addr: "127.0.0.1:http"},
		"negative max":         {DataDir: t.TempDir(), Addr: "127.0.0.1:0", MaxStore: -1},
		"negative max payload": {DataDir: t.TempDir(), Addr: "127.0.0.1:0", MaxPayload: -1},
	} {
		if _, err := embedded.Start(testContext(t), cfg); err == nil {
			t.Errorf("%s: Start succeeded, want error", name)
		}
	}
}

func TestClientURLUnspecifiedHost(t *testing.T) {
	t.Parallel()
	s := start(t, embedded.Config{DataDir: t.TempDir(), Addr: "0.0.0.0:0"})
	if !strings.HasPrefix(s.ClientURL(), "nats://127.0.0.1:") {
		t.Fatalf("ClientURL = %s, want loopback", s.ClientURL())
	}
	connect(t, s)
}

func TestLimitsAndName(t *testing.T) {
	t.Parallel()
	s := start(t, embedded.Config{DataDir: t.TempDir(), ServerName: "n7", MaxMemory: 32 << 20, MaxStore: 64 << 20})
	if got := s.NATS().Name(); got != "n7" {
		t.Fatalf("server name = %q, want n7", got)
	}
	cfg := s.NATS().JetStreamConfig()
	if cfg.MaxMemory != 32<<20 || cfg.MaxStore != 64<<20 {
		t.Fatalf("limits = %d/%d, want %d/%d", cfg.MaxMemory, cfg.MaxStore, 32<<20, 64<<20)
	}
}

// Issue 31 (ojs-json-format.md 8.1: a 1 MiB job envelope MUST be
// supported): the server's max_payload is 2 MiB unless set, and a client
// connection reads it; a message of 1.5 MiB is stored in a stream.
func TestMaxPayload(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		set, want int32
	}{{0, 2 << 20}, {4 << 20, 4 << 20}} {
		s := start(t, embedded.Config{DataDir: t.TempDir(), MaxPayload: tc.set})
		nc, err := nats.Connect(s.ClientURL())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		if got := nc.MaxPayload(); got != int64(tc.want) {
			t.Fatalf("max_payload set %d: the client reads %d, want %d", tc.set, got, tc.want)
		}
	}
	ctx := testContext(t)
	js := connect(t, start(t, embedded.Config{DataDir: t.TempDir()}))
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "BIG", Subjects: []string{"big"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(ctx, "big", bytes.Repeat([]byte("x"), 3<<19)); err != nil {
		t.Fatalf("publish 1.5 MiB: %v", err)
	}
}

// syncBuffer is a bytes.Buffer safe for the server's logging goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func TestLogsToSlog(t *testing.T) {
	t.Parallel()
	var buf syncBuffer
	logger := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))
	s := start(t, embedded.Config{DataDir: t.TempDir(), Logger: logger.With("component", "nats-server")})
	s.Shutdown()

	out := buf.String()
	for _, want := range []string{"level=INFO", "component=nats-server", `msg="Server is ready"`} {
		if !strings.Contains(out, want) {
			t.Errorf("log output lacks %s:\n%s", want, out)
		}
	}
	if strings.Contains(out, "level=DEBUG") {
		t.Errorf("debug lines logged at info level:\n%s", out)
	}
}

// TestTokenRequired (issue 20: the embedded listener can require a
// token): with Config.Token a client without it, or with another, is
// refused with an authorization violation; with it, it connects.
func TestTokenRequired(t *testing.T) {
	s := start(t, embedded.Config{DataDir: t.TempDir(), Addr: "127.0.0.1:0", Token: "s3cret"})
	for name, opts := range map[string][]nats.Option{"none": nil, "wrong": {nats.Token("guess")}} {
		nc, err := nats.Connect(s.ClientURL(), append(opts, nats.MaxReconnects(0))...)
		if err == nil {
			nc.Close()
			t.Fatalf("%s token: connected", name)
		}
		if !errors.Is(err, nats.ErrAuthorization) && !strings.Contains(strings.ToLower(err.Error()), "authorization") {
			t.Fatalf("%s token: %v, want an authorization violation", name, err)
		}
	}
	nc, err := nats.Connect(s.ClientURL(), nats.Token("s3cret"))
	if err != nil {
		t.Fatal(err)
	}
	nc.Close()
}

// Listening must know every kind of listener a message on the subject
// would reach, since jetgate's events are not sent when it says none: a
// client's subscription (wildcards included), a token-authenticated
// client's, and a stream capturing the subject; and it must forget a
// subscription once it is gone.
func TestListening(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	s := start(t, embedded.Config{DataDir: t.TempDir(), Token: "secret"})
	nc, err := nats.Connect(s.ClientURL(), nats.Token("secret"))
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(nc.Close)
	const subject = "ojs.events.job.completed"
	if s.Listening(subject) {
		t.Fatal("listening with no subscriber")
	}

	sub, err := nc.SubscribeSync("ojs.events.>")
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	if !s.Listening(subject) {
		t.Fatal("not listening with a subscriber on ojs.events.>")
	}
	if s.Listening("ojs.other") {
		t.Fatal("listening on a subject no subscription matches")
	}
	if err := sub.Unsubscribe(); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	if s.Listening(subject) {
		t.Fatal("still listening after the only subscriber left")
	}

	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "EV", Subjects: []string{"ojs.events.job.*"},
		Storage: jetstream.MemoryStorage}); err != nil {
		t.Fatalf("create stream: %v", err)
	}
	if !s.Listening(subject) {
		t.Fatal("not listening with a stream capturing the subject")
	}
}

// Issue 31 item 8: with NKeySeedFile the server accepts only clients that
// hold that user seed. CreateNKeySeed writes a new seed at first start
// (mode 0600), and a restart keeps it; a client without it, or with
// another user's seed, is refused; nats.NkeyOptionFromSeed on the file (what
// the nats CLI's --nkey does) connects.
func TestNKeySeedRequired(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	seed := filepath.Join(dir, "nats-user.nk")
	cfg := embedded.Config{DataDir: dir, NKeySeedFile: seed, CreateNKeySeed: true}
	s := start(t, cfg)
	fi, err := os.Stat(seed)
	if err != nil {
		t.Fatalf("seed file not created: %v", err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("seed file mode %04o, want 0600", fi.Mode().Perm())
	}
	other := filepath.Join(t.TempDir(), "other.nk")
	writeUserSeed(t, other)
	refused(t, s.ClientURL(), nil)
	refused(t, s.ClientURL(), nkeyOpt(t, other))
	refused(t, s.ClientURL(), []nats.Option{nats.Token("guess")})
	connectWith(t, s.ClientURL(), nkeyOpt(t, seed))

	first, _ := os.ReadFile(seed)
	s.Shutdown()
	s = start(t, cfg)
	if again, _ := os.ReadFile(seed); !bytes.Equal(first, again) {
		t.Fatal("a restart replaced the seed")
	}
	connectWith(t, s.ClientURL(), nkeyOpt(t, seed))
}

// A seed file given, not created: it must exist, hold a user seed and be
// readable by its owner only; a token and a seed together are refused.
func TestNKeySeedFileChecks(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	open := filepath.Join(dir, "open.nk")
	writeUserSeed(t, open)
	if err := os.Chmod(open, 0o644); err != nil {
		t.Fatal(err)
	}
	notUser := filepath.Join(dir, "account.nk")
	kp, _ := nkeys.CreateAccount()
	aseed, _ := kp.Seed()
	if err := os.WriteFile(notUser, aseed, 0o600); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct {
		cfg  embedded.Config
		want string
	}{
		"missing":      {embedded.Config{NKeySeedFile: filepath.Join(dir, "none.nk")}, "no such file"},
		"mode 0644":    {embedded.Config{NKeySeedFile: open}, "chmod 600"},
		"not a user":   {embedded.Config{NKeySeedFile: notUser}, "no user seed"},
		"token too":    {embedded.Config{NKeySeedFile: notUser, Token: "t"}, "exclude"},
		"create alone": {embedded.Config{CreateNKeySeed: true}, "needs NKeySeedFile"},
	} {
		c.cfg.DataDir, c.cfg.Addr = t.TempDir(), "127.0.0.1:0"
		s, err := embedded.Start(testContext(t), c.cfg)
		if err == nil {
			s.Shutdown()
			t.Errorf("%s: started", name)
		} else if !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error saying %q", name, err, c.want)
		}
	}
}

func writeUserSeed(t *testing.T, path string) {
	t.Helper()
	kp, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	seed, _ := kp.Seed()
	if err := os.WriteFile(path, seed, 0o600); err != nil {
		t.Fatal(err)
	}
}

func nkeyOpt(t *testing.T, seedFile string) []nats.Option {
	t.Helper()
	o, err := nats.NkeyOptionFromSeed(seedFile)
	if err != nil {
		t.Fatal(err)
	}
	return []nats.Option{o}
}

// refused fails the test unless connecting with opts is refused with an
// authorization violation.
func refused(t *testing.T, url string, opts []nats.Option) {
	t.Helper()
	nc, err := nats.Connect(url, append(opts, nats.MaxReconnects(0))...)
	if err == nil {
		nc.Close()
		t.Fatal("connected without the seed")
	}
	if !errors.Is(err, nats.ErrAuthorization) && !strings.Contains(strings.ToLower(err.Error()), "authorization") {
		t.Fatalf("error %v, want an authorization violation", err)
	}
}

func connectWith(t *testing.T, url string, opts []nats.Option) {
	t.Helper()
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		t.Fatalf("connect with the seed: %v", err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.AccountInfo(testContext(t)); err != nil {
		t.Fatalf("JetStream with the seed: %v", err)
	}
}
