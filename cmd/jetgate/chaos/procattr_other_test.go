//go:build !linux

package chaos

import "os/exec"

// setDeathSignal does nothing outside Linux: t.Cleanup kills the children.
func setDeathSignal(*exec.Cmd) {}
