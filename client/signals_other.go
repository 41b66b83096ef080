//go:build !unix

package client

import "os"

// Without POSIX job control only the interrupt drains the worker
// (ojs-worker-protocol.md 9.6); quiet and resume are Quiet and Resume.
var (
	stopSignals       = []os.Signal{os.Interrupt}
	quietSignal       os.Signal
	resumeSignal      os.Signal
	jobControlSignals []os.Signal
)
