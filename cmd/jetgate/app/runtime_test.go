package app

import (
	"math"
	"runtime/debug"
	"testing"
)

// keepRuntime restores the collector's settings after a test that tunes
// them (TuneRuntime changes the whole process).
func keepRuntime(t *testing.T) {
	pct := debug.SetGCPercent(100)
	lim := debug.SetMemoryLimit(-1)
	t.Cleanup(func() {
		debug.SetGCPercent(pct)
		debug.SetMemoryLimit(lim)
	})
}

func env(vars map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := vars[k]; return v, ok }
}

func TestTuneRuntimePrecedence(t *testing.T) {
	keepRuntime(t)
	cases := []struct {
		name      string
		r         Runtime
		env       map[string]string
		ceiling   int64
		from      string
		gcBefore  int   // what the runtime read from GOGC at start
		limBefore int64 // and from GOMEMLIMIT
		want      RuntimeSettings
		wantPct   int
		wantLim   int64 // as GC reads it: 0 is none
	}{
		{"defaults, no ceiling known", Runtime{}, nil, 0, "", 100, math.MaxInt64,
			RuntimeSettings{DefaultGCPercent, "default", 0, "none"}, DefaultGCPercent, 0},
		{"3/4 of the cgroup's limit", Runtime{}, nil, 4 << 30, "cgroup", 100, math.MaxInt64,
			RuntimeSettings{DefaultGCPercent, "default", 3 << 30, "cgroup"}, DefaultGCPercent, 3 << 30},
		{"3/4 of the machine's memory", Runtime{}, nil, 8 << 30, "machine", 100, math.MaxInt64,
			RuntimeSettings{DefaultGCPercent, "default", 6 << 30, "machine"}, DefaultGCPercent, 6 << 30},
		{"GOGC and GOMEMLIMIT stand", Runtime{}, map[string]string{"GOGC": "150", "GOMEMLIMIT": "1GiB"}, 4 << 30, "cgroup", 150, 1 << 30,
			RuntimeSettings{150, "GOGC", 1 << 30, "GOMEMLIMIT"}, 150, 1 << 30},
		{"flags win over the environment", Runtime{GCPercent: 250, MemoryLimit: 2 << 30}, map[string]string{"GOGC": "150", "GOMEMLIMIT": "1GiB"}, 4 << 30, "cgroup", 150, 1 << 30,
			RuntimeSettings{250, "flag", 2 << 30, "flag"}, 250, 2 << 30},
		{"no limit though a cgroup has one", Runtime{MemoryLimit: -1}, nil, 4 << 30, "cgroup", 100, 1 << 30,
			RuntimeSettings{DefaultGCPercent, "default", 0, "none"}, DefaultGCPercent, 0},
		{"collector off under a limit", Runtime{GCPercent: -1, MemoryLimit: 1 << 30}, nil, 0, "", 100, math.MaxInt64,
			RuntimeSettings{-1, "flag", 1 << 30, "flag"}, -1, 1 << 30},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			debug.SetGCPercent(tc.gcBefore)
			debug.SetMemoryLimit(tc.limBefore)
			got := TuneRuntime(tc.r, env(tc.env), func() (int64, string) { return tc.ceiling, tc.from })
			if got != tc.want {
				t.Errorf("TuneRuntime = %+v, want %+v", got, tc.want)
			}
			if pct, lim := GC(); pct != tc.wantPct || lim != tc.wantLim {
				t.Errorf("runtime has GC %d, limit %d; want %d, %d", pct, lim, tc.wantPct, tc.wantLim)
			}
		})
	}
}

func TestRuntimeValidate(t *testing.T) {
	for _, r := range []Runtime{{}, {GCPercent: 10}, {GCPercent: 400, MemoryLimit: -1}, {GCPercent: -1, MemoryLimit: 1 << 30}} {
		if err := r.Validate(); err != nil {
			t.Errorf("%+v: %v", r, err)
		}
	}
	for _, r := range []Runtime{{GCPercent: 5}, {GCPercent: -2}, {GCPercent: -1}, {GCPercent: -1, MemoryLimit: -1}, {MemoryLimit: -5}} {
		if err := r.Validate(); err == nil {
			t.Errorf("%+v: no error", r)
		}
	}
}

func TestParseCgroupLimit(t *testing.T) {
	for in, want := range map[string]int64{
		"max\n":                 0,
		"4294967296\n":          4 << 30,
		"9223372036854771712\n": 0, // cgroup v1's "unlimited"
		"":                      0,
		"garbage":               0,
		"0":                     0,
		"536870912":             512 << 20,
	} {
		if got := parseCgroupLimit(in); got != want {
			t.Errorf("parseCgroupLimit(%q) = %d, want %d", in, got, want)
		}
	}
}

// The ceiling is the cgroup's limit or the machine's memory, the smaller.
func TestMemoryCeiling(t *testing.T) {
	c, from := MemoryCeiling()
	if m := machineMemory(); m > 0 && (c <= 0 || c > m) {
		t.Errorf("MemoryCeiling = %d (%s), more than the machine's %d", c, from, m)
	}
	if cg := CgroupMemoryLimit(); cg > 0 && c > cg {
		t.Errorf("MemoryCeiling = %d (%s), more than the cgroup's %d", c, from, cg)
	}
}
