package main

import (
	"errors"
	"io"
	"log/slog"
	"os"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// TestReloadOnSignal (issue 20: reload the TLS certificate on SIGHUP):
// every signal calls reload once, a failing reload does not stop the loop,
// and closing done ends it.
func TestReloadOnSignal(t *testing.T) {
	sig := make(chan os.Signal)
	done := make(chan struct{})
	var calls atomic.Int32
	reload := func() error {
		if calls.Add(1) == 1 {
			return errors.New("broken file")
		}
		return nil
	}
	ended := make(chan struct{})
	go func() {
		reloadOnSignal(sig, done, reload, slog.New(slog.NewTextHandler(io.Discard, nil)))
		close(ended)
	}()
	sig <- syscall.SIGHUP // unbuffered: received by the loop
	sig <- syscall.SIGHUP
	sig <- syscall.SIGHUP // the second reload has returned once this is received
	close(done)
	select {
	case <-ended:
	case <-time.After(10 * time.Second):
		t.Fatal("reloadOnSignal did not end after done was closed")
	}
	if n := calls.Load(); n != 3 {
		t.Fatalf("reload called %d times, want 3", n)
	}
}

func TestParseServeTLSPair(t *testing.T) {
	t.Parallel()
	cfg, err := parseServe([]string{"--tls-cert", "/c.pem"}, lookup(map[string]string{"JETGATE_TLS_KEY": "/k.pem"}))
	if err != nil || cfg.TLSCert != "/c.pem" || cfg.TLSKey != "/k.pem" {
		t.Fatalf("cfg %q %q, err %v", cfg.TLSCert, cfg.TLSKey, err)
	}
}
