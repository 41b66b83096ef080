package bench

import (
	"context"
	"time"
)

// cpuPerSecond is the process's CPU milliseconds per wall second over d.
func cpuPerSecond(ctx context.Context, d time.Duration) (float64, error) {
	before := processCPU()
	if err := sleep(ctx, d); err != nil {
		return 0, err
	}
	return float64(processCPU()-before) / float64(time.Millisecond) / d.Seconds(), nil
}
