// Package pools is the fair scheduling extension's worker pools and
// scheduling statistics (ojs-fair-scheduling.md 6, 10). A pool is a
// worker group (bucket OJS_GROUPS, see admission's groups): the weighted
// and strict consumption a fetch already does is the scheduler; this
// package adds no second one. A worker joins a pool by naming it in its
// heartbeat ("pool", recorded by admission/workers) or its fetch
// ("group"); its fetches then take the pool's strategy and weights for
// what they leave out (round-robin is weighted consumption with equal
// weights). A pool's concurrency is recorded and reported, not enforced.
// Pools hold no state of their own: they read and write worker groups
// and read queues, queue stats and the worker registry.
package pools
