package natstest

import (
	"sync"
	"testing"
)

// LogWriter forwards what is written to it (a jetgate server's log) to a
// test's log until Stop: testing panics on a log call after the test
// ended, and a server's goroutines may still log while it shuts down.
type LogWriter struct {
	mu   sync.Mutex
	t    testing.TB
	done bool
}

// NewLogWriter returns a LogWriter for t.
func NewLogWriter(t testing.TB) *LogWriter { return &LogWriter{t: t} }

func (l *LogWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.done {
		l.t.Logf("jetgate: %s", p)
	}
	return len(p), nil
}

// Stop ends the forwarding; later writes are dropped.
func (l *LogWriter) Stop() {
	l.mu.Lock()
	l.done = true
	l.mu.Unlock()
}
