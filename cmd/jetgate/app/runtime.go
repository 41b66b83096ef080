package app

import (
	"fmt"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
)

// Runtime tunes the Go garbage collector of a jetgate process. The serve
// and bench commands apply it (TuneRuntime) before they start a server;
// Start never does, so a server of the test kit leaves the runtime of the
// process it runs in alone.
//
// Why jetgate sets a GC target of its own: a job is a few tens of KB of
// short-lived garbage in one process (HTTP requests and answers, NATS
// messages in and out, and with the embedded server its stores), while
// the live heap is small, so at Go's default (GOGC=100) the collector
// runs dozens of times a second and took 25-30% of the CPU of a drain
// (docs/performance.md, "GC target"). At 400 the heap may grow to five
// times the live heap between collections instead of twice; the soft
// memory limit keeps that growth inside a container's memory.
type Runtime struct {
	// GCPercent is the collector's target (GOGC). 0 means auto: the GOGC
	// environment variable when set, else DefaultGCPercent. -1 turns the
	// collector off (allowed only under a memory limit).
	GCPercent int
	// MemoryLimit is the soft memory limit in bytes (GOMEMLIMIT). 0 means
	// auto: the GOMEMLIMIT environment variable when set, else 3/4 of the
	// cgroup's memory limit or of the machine's memory, whichever is less
	// (MemoryCeiling). -1 means none.
	MemoryLimit int64
}

// DefaultGCPercent is the GC target of a jetgate process when neither
// --gc-percent nor GOGC says otherwise.
const DefaultGCPercent = 400

// RuntimeSettings is what TuneRuntime applied and where each came from,
// for the startup log.
type RuntimeSettings struct {
	GCPercent   int    // -1: off
	GCSource    string // "flag", "GOGC", "default"
	MemoryLimit int64  // 0: none
	LimitSource string // "flag", "GOMEMLIMIT", "cgroup", "machine", "none"
}

// GC reads the collector's target (-1: off) and soft memory limit (0:
// none) the process runs with now.
func GC() (percent int, limit int64) {
	percent = debug.SetGCPercent(-1) // -1 also turns it off: set it back
	debug.SetGCPercent(percent)
	if limit = debug.SetMemoryLimit(-1); limit == noLimit { // -1 reads without setting
		limit = 0
	}
	return percent, limit
}

// Validate checks the settings a user gave.
func (r Runtime) Validate() error {
	switch {
	case r.GCPercent < -1 || (r.GCPercent > 0 && r.GCPercent < 10):
		return fmt.Errorf("gc percent must be off (-1), 0 (auto) or at least 10, got %d", r.GCPercent)
	case r.GCPercent == -1 && r.MemoryLimit <= 0:
		return fmt.Errorf("gc percent off needs a memory limit given with it, or the heap grows without bound")
	case r.MemoryLimit < -1:
		return fmt.Errorf("memory limit must be a byte count, 0 (auto) or -1 (none), got %d", r.MemoryLimit)
	}
	return nil
}

// TuneRuntime applies r to this process's Go runtime and reports what it
// applied. lookupEnv reads the environment (os.LookupEnv); ceiling tells
// the memory the process may use and what bounds it (MemoryCeiling).
// The runtime already read GOGC and GOMEMLIMIT at start, so where they
// stand TuneRuntime leaves the runtime as it is.
func TuneRuntime(r Runtime, lookupEnv func(string) (string, bool), ceiling func() (int64, string)) RuntimeSettings {
	var s RuntimeSettings
	switch _, env := lookupEnv("GOGC"); {
	case r.GCPercent != 0:
		s.GCPercent, s.GCSource = r.GCPercent, "flag"
		debug.SetGCPercent(r.GCPercent)
	case env:
		s.GCPercent, _ = GC()
		s.GCSource = "GOGC"
	default:
		s.GCPercent, s.GCSource = DefaultGCPercent, "default"
		debug.SetGCPercent(DefaultGCPercent)
	}
	switch _, env := lookupEnv("GOMEMLIMIT"); {
	case r.MemoryLimit > 0:
		s.MemoryLimit, s.LimitSource = r.MemoryLimit, "flag"
		debug.SetMemoryLimit(r.MemoryLimit)
	case r.MemoryLimit == -1:
		s.LimitSource = "none"
		debug.SetMemoryLimit(noLimit)
	case env:
		_, s.MemoryLimit = GC()
		s.LimitSource = "GOMEMLIMIT"
	default:
		if c, from := ceiling(); c > 0 {
			s.MemoryLimit, s.LimitSource = c/4*3, from
			debug.SetMemoryLimit(s.MemoryLimit)
		} else {
			s.LimitSource = "none"
			debug.SetMemoryLimit(noLimit)
		}
	}
	return s
}

// noLimit is the runtime's "no memory limit" (math.MaxInt64).
const noLimit = int64(^uint64(0) >> 1)

// MemoryCeiling is the memory this process may use: its cgroup's limit
// ("cgroup") or the machine's memory ("machine"), whichever is less, or
// 0 when neither can be read. With the collector at 400, the heap may
// grow to five times the live heap between collections: a limit at 3/4
// of this makes the collector run sooner rather than the process run out
// (at Go's default of 100 and no limit, a live heap over half the memory
// ran out too).
func MemoryCeiling() (int64, string) {
	c, m := CgroupMemoryLimit(), machineMemory()
	switch {
	case c > 0 && (m == 0 || c <= m):
		return c, "cgroup"
	case m > 0:
		return m, "machine"
	}
	return 0, ""
}

// CgroupMemoryLimit is the memory limit of this process's cgroup in
// bytes (cgroup v2 memory.max, else v1 memory.limit_in_bytes), or 0 when
// there is none or it cannot be read. A v1 "no limit" is a huge number
// rounded to the page size; anything from 1 PiB up counts as none.
func CgroupMemoryLimit() int64 {
	for _, path := range []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"} {
		b, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		return parseCgroupLimit(string(b))
	}
	return 0
}

func parseCgroupLimit(s string) int64 {
	s = strings.TrimSpace(s)
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 || n >= 1<<50 {
		return 0 // "max", unreadable, or v1's "unlimited"
	}
	return n
}
