package chaos

import (
	"os/exec"
	"syscall"
)

// setDeathSignal makes the kernel kill the child when the test process dies,
// so an interrupted run leaves no nats-server or jetgate behind.
func setDeathSignal(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
