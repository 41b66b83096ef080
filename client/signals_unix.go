//go:build unix

package client

import (
	"os"
	"syscall"
)

// Signals of ojs-worker-protocol.md 9: stop signals drain the worker,
// quiet and resume are the job-control signals.
var (
	stopSignals       = []os.Signal{syscall.SIGTERM, os.Interrupt}
	quietSignal       = syscall.SIGTSTP
	resumeSignal      = syscall.SIGCONT
	jobControlSignals = []os.Signal{quietSignal, resumeSignal}
)
