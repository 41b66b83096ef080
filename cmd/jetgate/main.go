package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/jetgate/jetgate/bench"
)

func main() {
	// jetgate bench runs its drains' workers as processes of this
	// executable (bench/workerproc.go).
	bench.RunWorkerProcess()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "jetgate:", err)
		os.Exit(1)
	}
}
