//go:build !linux

package app

// machineMemory is unknown off Linux: only a cgroup limit (none there) or
// --memory-limit bounds the heap.
func machineMemory() int64 { return 0 }
