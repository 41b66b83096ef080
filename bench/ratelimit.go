package bench

import (
	"context"
	"fmt"
)

// limitedBody returns job bodies carrying policy(i) as their rate_limit.
func limitedBody(policy func(i int) string) BodyFunc {
	return func(queue string, i, size int) []byte {
		return withField(jobBody(queue, i, size), "rate_limit", policy(i))
	}
}

// unlimitedSide is the Go round trip with no rate limit, the baseline of
// what a limit costs.
func unlimitedSide(sh Shape) Side {
	return Side{Name: "jetgate unlimited", Run: func(ctx context.Context, e *Env) (Sample, error) {
		return e.GoRoundTrip(ctx, sh, "bench-rl", nil)
	}}
}

// limitedSide is the Go round trip on queue with every job carrying
// policy(i).
func limitedSide(name, queue string, sh Shape, policy func(i int) string) Side {
	return Side{Name: name, Run: func(ctx context.Context, e *Env) (Sample, error) {
		return e.GoRoundTrip(ctx, sh, queue, limitedBody(policy))
	}}
}

// oneKey is a concurrency limit on one key, far above the load.
func oneKey(int) string { return `{"key":"bench-one","concurrency":100000}` }

// manyKeys spreads jobs over n keys, each with a concurrency limit far
// above its load.
func manyKeys(n int) func(int) string {
	return func(i int) string { return fmt.Sprintf(`{"key":"bench-k%d","concurrency":1000}`, i%n) }
}
