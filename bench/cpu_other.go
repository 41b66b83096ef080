//go:build !unix

package bench

import "time"

// processCPU is not measured off unix: waiting-10k then reports 0 ms/s
// for both sides.
func processCPU() time.Duration { return 0 }
