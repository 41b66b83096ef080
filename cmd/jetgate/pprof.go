package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"sync"
	"time"
)

// loopbackAddr checks that addr is HOST:PORT with a loopback host
// (localhost, 127.0.0.0/8 or ::1): profiles show memory contents and
// must not be reachable from other hosts.
func loopbackAddr(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("want HOST:PORT: %w", err)
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("host %q is not a loopback address (127.0.0.1, ::1 or localhost)", host)
}

// servePprof serves net/http/pprof on addr (a loopback address) on its
// own listener and mux, apart from the API. stop closes it and waits for
// its goroutine.
func servePprof(addr string, log *slog.Logger) (stop func(), err error) {
	stop, _, err = servePprofAddr(addr, log)
	return stop, err
}

// servePprofAddr is servePprof that also returns the address listened on.
func servePprofAddr(addr string, log *slog.Logger) (stop func(), bound string, err error) {
	if err := loopbackAddr(addr); err != nil {
		return nil, "", fmt.Errorf("pprof address: %w", err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, "", fmt.Errorf("pprof listen: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("pprof server stopped", "error", err)
		}
	}()
	log.Info("serving pprof profiles", "addr", ln.Addr().String())
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			_ = srv.Close()
		}
		wg.Wait()
	}, ln.Addr().String(), nil
}
