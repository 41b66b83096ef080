package main

import (
	"os/exec"
	"syscall"
)

// setDeathSignal makes the kernel kill the child when the test process
// dies, so an interrupted run leaves no jetgate behind.
func setDeathSignal(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
