//go:build !linux

package main

import "os/exec"

// setDeathSignal does nothing where the kernel offers no death signal.
func setDeathSignal(*exec.Cmd) {}
