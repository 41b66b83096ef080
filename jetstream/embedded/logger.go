package embedded

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
)

// slogLogger adapts nats-server's server.Logger to slog. Notices are Info,
// traces are Debug, and Fatalf is an Error that is also kept so Start can
// return it: nats-server calls Fatalf when it cannot listen or start
// JetStream, and expects the logger to exit the process, which we never do.
type slogLogger struct {
	log *slog.Logger

	mu    sync.Mutex
	fatal error
}

func (l *slogLogger) emit(level slog.Level, format string, v []any) {
	if !l.log.Enabled(context.Background(), level) {
		return
	}
	l.log.Log(context.Background(), level, strings.TrimSpace(fmt.Sprintf(format, v...)))
}

func (l *slogLogger) Noticef(format string, v ...any) { l.emit(slog.LevelInfo, format, v) }
func (l *slogLogger) Warnf(format string, v ...any)   { l.emit(slog.LevelWarn, format, v) }
func (l *slogLogger) Errorf(format string, v ...any)  { l.emit(slog.LevelError, format, v) }
func (l *slogLogger) Debugf(format string, v ...any)  { l.emit(slog.LevelDebug, format, v) }
func (l *slogLogger) Tracef(format string, v ...any)  { l.emit(slog.LevelDebug, format, v) }

func (l *slogLogger) Fatalf(format string, v ...any) {
	l.emit(slog.LevelError, format, v)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.fatal == nil {
		l.fatal = fmt.Errorf(format, v...)
	}
}

// fatalErr returns the first Fatalf line, or nil.
func (l *slogLogger) fatalErr() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.fatal
}
