package natstest

import (
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// readyTimeout bounds how long a server may take to accept connections.
const readyTimeout = 10 * time.Second

// started remembers the options each server was started with (before
// nats-server mutated them), so RestartServer can start an identical one.
var started sync.Map // *server.Server -> *server.Options

// RunServer starts a single-node JetStream server on 127.0.0.1 with a random
// port and a store dir under t.TempDir(). It is shut down when the test ends.
func RunServer(t testing.TB) *server.Server {
	t.Helper()
	return RunServerOpts(t, nil)
}

// RunServerOpts is RunServer with a hook that may change the options before
// the server starts (memory limits, accounts, a fixed port ...).
func RunServerOpts(t testing.TB, modify func(*server.Options)) *server.Server {
	t.Helper()
	opts := DefaultOptions(t)
	if modify != nil {
		modify(opts)
	}
	return StartServer(t, opts)
}

// DefaultOptions returns the options RunServer uses: JetStream enabled,
// 127.0.0.1, random client port, store dir in t.TempDir(), no logs, no
// signal handlers.
func DefaultOptions(t testing.TB) *server.Options {
	t.Helper()
	return &server.Options{
		Host:      "127.0.0.1",
		Port:      -1,
		JetStream: true,
		StoreDir:  t.TempDir(),
		NoLog:     true,
		NoSigs:    true,
	}
}

// StartServer starts a server with exactly these options, waits until it
// accepts connections and registers its shutdown with t.Cleanup.
func StartServer(t testing.TB, opts *server.Options) *server.Server {
	t.Helper()
	pristine := opts.Clone()
	s, err := server.NewServer(opts)
	if err != nil {
		t.Fatalf("natstest: new server: %v", err)
	}
	logs := newCaptureLogger(s.Name())
	s.SetLoggerV2(logs, logs.verbose, false, false)
	s.Start()
	if !s.ReadyForConnections(readyTimeout) {
		s.Shutdown()
		t.Fatalf("natstest: server %s not ready after %s; errors: %s", s.Name(), readyTimeout, logs.errors())
	}
	// Remember the actual port so a restart comes back on it.
	if addr, ok := s.Addr().(*net.TCPAddr); ok {
		pristine.Port = addr.Port
	}
	started.Store(s, pristine)
	t.Cleanup(func() {
		Kill(s)
		started.Delete(s)
	})
	return s
}

// Kill stops s at once: the test's point is that whoever was using it got no
// warning. It waits until the server released its port and store dir, so a
// RestartServer can follow. Calling it on a stopped server is a no-op.
func Kill(s *server.Server) {
	s.Shutdown()
	s.WaitForShutdown()
}

// RestartServer stops old if it still runs, then starts a new server with the
// same options, the same store dir and the same client (and cluster) port.
// Clients with reconnect enabled (Connect's default) come back on their own;
// see WaitStatus for requests sent while the server was away.
// It works for cluster nodes too; see also Cluster.Restart.
func RestartServer(t testing.TB, old *server.Server) *server.Server {
	t.Helper()
	v, ok := started.Load(old)
	if !ok {
		t.Fatalf("natstest: server %s was not started by natstest", old.Name())
	}
	Kill(old)
	return StartServer(t, v.(*server.Options).Clone())
}

// captureLogger keeps the last error lines of a server for failure messages
// and, when JETGATE_TEST_NATS_LOG is set, prints everything to stderr.
type captureLogger struct {
	name    string
	verbose bool

	mu   sync.Mutex
	errs []string
}

const maxCapturedErrors = 20

func newCaptureLogger(name string) *captureLogger {
	return &captureLogger{name: name, verbose: os.Getenv("JETGATE_TEST_NATS_LOG") != ""}
}

func (l *captureLogger) print(level, format string, v []any) {
	if l.verbose {
		fmt.Fprintf(os.Stderr, "[%s] %s %s\n", l.name, level, fmt.Sprintf(format, v...))
	}
}

func (l *captureLogger) keep(format string, v []any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.errs) == maxCapturedErrors {
		l.errs = l.errs[1:]
	}
	l.errs = append(l.errs, fmt.Sprintf(format, v...))
}

func (l *captureLogger) errors() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.errs) == 0 {
		return "none logged"
	}
	return strings.Join(l.errs, "; ")
}

func (l *captureLogger) Noticef(format string, v ...any) { l.print("INF", format, v) }
func (l *captureLogger) Warnf(format string, v ...any)   { l.print("WRN", format, v) }
func (l *captureLogger) Debugf(format string, v ...any)  { l.print("DBG", format, v) }
func (l *captureLogger) Tracef(format string, v ...any)  { l.print("TRC", format, v) }

func (l *captureLogger) Errorf(format string, v ...any) {
	l.print("ERR", format, v)
	l.keep(format, v)
}

func (l *captureLogger) Fatalf(format string, v ...any) {
	l.print("FTL", format, v)
	l.keep(format, v)
}
