package main

import (
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
)

// --pprof-addr is off by default and accepts only loopback hosts: profiles
// expose memory contents.
func TestParseServePprofAddr(t *testing.T) {
	t.Parallel()
	noEnv := func(string) (string, bool) { return "", false }
	cfg, err := parseServe(nil, noEnv)
	if err != nil || cfg.PprofAddr != "" {
		t.Fatalf("default: %q, %v; want off", cfg.PprofAddr, err)
	}
	for _, ok := range []string{"127.0.0.1:6060", "localhost:0", "[::1]:6060"} {
		if _, err := parseServe([]string{"--pprof-addr", ok}, noEnv); err != nil {
			t.Errorf("%s refused: %v", ok, err)
		}
	}
	for _, bad := range []string{"0.0.0.0:6060", ":6060", "10.0.0.1:6060", "example.com:6060", "127.0.0.1"} {
		if _, err := parseServe([]string{"--pprof-addr", bad}, noEnv); err == nil || !strings.Contains(err.Error(), "--pprof-addr") {
			t.Errorf("%s: err = %v, want a --pprof-addr refusal", bad, err)
		}
	}
}

// servePprof serves the heap profile on its own loopback listener and
// stops with its goroutine.
func TestServePprofServesHeap(t *testing.T) {
	t.Parallel()
	stop, addr := startPprof(t)
	resp, err := http.Get("http://" + addr + "/debug/pprof/heap?debug=1")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "heap profile") {
		t.Fatalf("heap profile: %d %.200q", resp.StatusCode, body)
	}
	stop()
	if _, err := http.Get("http://" + addr + "/debug/pprof/heap"); err == nil {
		t.Fatal("pprof still served after stop")
	}
}

func startPprof(t *testing.T) (stop func(), addr string) {
	t.Helper()
	stop, addr, err := servePprofAddr("127.0.0.1:0", slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	return stop, addr
}
