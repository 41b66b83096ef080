package main

import (
	"bytes"
	"context"
	"flag"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jetgate/jetgate/cmd/jetgate/app"
)

// serveRanges is every serve flag with a minimum (issue 31 item 5): a value
// just below it (and above the maximum, where there is one), the least
// accepted value and the field it lands in. TestEveryRangedFlagIsListed
// keeps the list complete.
var serveRanges = []struct {
	flag        string
	refused     []string
	least       string
	field       func(app.Config) any
	want        any
	wantInError string
}{
	{"replicas", []string{"0", "-1", "6"}, "1", func(c app.Config) any { return c.Replicas }, 1, "must be 1..5"},
	{"default-timeout", []string{"0s", "999ms", "-1s"}, "1s", func(c app.Config) any { return c.DefaultTimeout }, time.Second, "must be at least 1s"},
	{"default-grace-period", []string{"-1ns", "-30s"}, "0s", func(c app.Config) any { return c.DefaultGracePeriod }, time.Duration(-1), "must be at least 0s"},
	{"default-heartbeat-timeout", []string{"0s", "999ms", "-1m"}, "1s", func(c app.Config) any { return c.DefaultHeartbeatTimeout }, time.Second, "must be at least 1s"},
	{"claim-ack-wait", []string{"0s", "999ms", "-30s"}, "1s", func(c app.Config) any { return c.ClaimAckWait }, time.Second, "must be at least 1s"},
	{"retention", []string{"0s", "500ms", "-24h", "876000h1s", "2562047h"}, "1s", func(c app.Config) any { return c.Retention }, time.Second, "must be 1s..876000h"},
	{"dead-retention", []string{"0s", "-1h", "876001h"}, "1s", func(c app.Config) any { return c.DeadRetention }, time.Second, "must be 1s..876000h"},
	{"max-body-bytes", []string{"0", "1023", "-1", "-1MiB"}, "1KiB", func(c app.Config) any { return c.MaxBodyBytes }, int64(1024), "must be at least 1KiB"},
	{"max-fetch-count", []string{"0", "-5"}, "1", func(c app.Config) any { return c.MaxFetchCount }, 1, "must be at least 1"},
	{"shutdown-timeout", []string{"0s", "999ms", "-5s"}, "1s", func(c app.Config) any { return c.ShutdownTimeout }, time.Second, "must be at least 1s"},
	{"queue-max-depth", []string{"-1"}, "0", func(c app.Config) any { return c.QueueMaxDepth }, int64(0), "must be at least 0"},
	{"queue-max-size-bytes", []string{"-1", "-1KiB"}, "0", func(c app.Config) any { return c.QueueMaxSizeBytes }, int64(0), "must be at least 0"},
	{"max-block-timeout", []string{"0s", "-1s", "999us"}, "1ms", func(c app.Config) any { return c.MaxBlockTimeout }, time.Millisecond, "must be at least 1ms"},
	{"events-max-age", []string{"0s", "-1h"}, "1s", func(c app.Config) any { return c.EventsMaxAge }, time.Second, "must be at least 1s"},
	{"events-max-msgs", []string{"0", "-1"}, "1", func(c app.Config) any { return c.EventsMaxMsgs }, int64(1), "must be at least 1"},
	{"events-max-bytes", []string{"0", "1000", "-1"}, "1024", func(c app.Config) any { return c.EventsMaxBytes }, int64(1024), "must be at least 1KiB"},
	{"events-buffer", []string{"0", "-1"}, "1", func(c app.Config) any { return c.EventsBuffer }, 1, "must be at least 1"},
	{"events-buffer-bytes", []string{"0", "1KB", "-1"}, "1KiB", func(c app.Config) any { return c.EventsBufferBytes }, int64(1024), "must be at least 1KiB"},
	{"events-idle", []string{"0s", "-10m"}, "1s", func(c app.Config) any { return c.EventsIdle }, time.Second, "must be at least 1s"},
	// Issue 32 events: 0 keeps none of a process's own events, which app.Config spells -1.
	{"events-own", []string{"-1"}, "0", func(c app.Config) any { return c.EventsOwn }, -1, "must be at least 0"},
	{"events-own-bytes", []string{"0", "1000", "-1"}, "1KiB", func(c app.Config) any { return c.EventsOwnBytes }, int64(1024), "must be at least 1KiB"},
	{"otel-traces-sample-ratio", []string{"-0.1", "1.01", "NaN", "Inf"}, "0", func(c app.Config) any { return c.TracesSampleRatio }, 0.0, "must be 0..1"},
}

// TestServeRefusesValuesBelowTheMinimum (issue 31 item 5): every serve
// flag with a minimum refuses, at start, a value below it (and above its
// maximum), by flag and by JETGATE_ variable, with an error naming the
// flag (the variable and the flag, for the variable) and the range; before,
// 0 silently meant the default and a negative value something else. The
// least value is accepted and lands as written (a grace period of 0s is
// "none", which app.Config spells -1).
func TestServeRefusesValuesBelowTheMinimum(t *testing.T) {
	t.Parallel()
	for _, tc := range serveRanges {
		t.Run(tc.flag, func(t *testing.T) {
			t.Parallel()
			env := envName(tc.flag)
			for _, v := range tc.refused {
				_, err := parseServe([]string{"--" + tc.flag, v}, lookup(nil))
				if err == nil || !strings.Contains(err.Error(), "-"+tc.flag+":") || !strings.Contains(err.Error(), tc.wantInError) {
					t.Errorf("--%s %s: err = %v, want one naming -%s and %q", tc.flag, v, err, tc.flag, tc.wantInError)
				}
				_, err = parseServe(nil, lookup(map[string]string{env: v}))
				if err == nil || !strings.Contains(err.Error(), env+" (--"+tc.flag+")") || !strings.Contains(err.Error(), tc.wantInError) {
					t.Errorf("%s=%s: err = %v, want one naming %s, --%s and %q", env, v, err, env, tc.flag, tc.wantInError)
				}
			}
			cfg, err := parseServe([]string{"--" + tc.flag + "=" + tc.least}, lookup(nil))
			if err != nil {
				t.Fatalf("--%s=%s: %v", tc.flag, tc.least, err)
			}
			if got := tc.field(cfg); got != tc.want {
				t.Errorf("--%s=%s: got %v (%T), want %v (%T)", tc.flag, tc.least, got, got, tc.want, tc.want)
			}
			cfg, err = parseServe(nil, lookup(map[string]string{env: tc.least}))
			if err != nil || tc.field(cfg) != tc.want {
				t.Errorf("%s=%s: got %v, %v; want %v", env, tc.least, tc.field(cfg), err, tc.want)
			}
		})
	}
}

// TestServeRefusesBelowTheMinimumAtStart: the refusal stops serve before
// anything starts, with the short usage on stderr (the command as a user
// runs it).
func TestServeRefusesBelowTheMinimumAtStart(t *testing.T) {
	t.Parallel()
	// A cancelled context: should the flag be taken, Start fails at once
	// with another error instead of serving.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var out, errOut bytes.Buffer
	err := run(ctx, []string{"serve", "--default-timeout", "0s", "--data-dir", t.TempDir(),
		"--http-addr", "127.0.0.1:0", "--nats-addr", "127.0.0.1:0"}, &out, &errOut)
	stdout, stderr := out.String(), errOut.String()
	if err == nil || err.Error() != `invalid value "0s" for flag -default-timeout: must be at least 1s` {
		t.Fatalf("err = %v", err)
	}
	if stdout != "" || !strings.Contains(stderr, "Usage:") {
		t.Fatalf("stdout %q, stderr %q", stdout, stderr)
	}
}

// TestEveryRangedFlagIsListed keeps serveRanges complete, and keeps every
// numeric serve flag ranged: a flag defined with fs.IntVar, DurationVar
// and the like has no minimum, so it would take 0 or a negative value
// silently.
func TestEveryRangedFlagIsListed(t *testing.T) {
	t.Parallel()
	listed := map[string]bool{}
	for _, tc := range serveRanges {
		listed[tc.flag] = true
	}
	var cfg app.Config
	newServeFlags(&cfg).VisitAll(func(f *flag.Flag) {
		_, isRanged := f.Value.(ranged)
		if isRanged != listed[f.Name] {
			t.Errorf("--%s: ranged %v, listed in serveRanges %v", f.Name, isRanged, listed[f.Name])
		}
		if g, ok := f.Value.(flag.Getter); ok {
			switch g.Get().(type) {
			case int, int64, uint, uint64, float64, time.Duration:
				t.Errorf("--%s is a plain numeric flag: define it with a minimum (bounded.go)", f.Name)
			}
		}
		delete(listed, f.Name)
	})
	for name := range listed {
		t.Errorf("serveRanges lists --%s, which is not a serve flag", name)
	}
}

// TestReferenceStatesFlagRanges keeps docs/reference.md true: every serve
// flag has a row (the README promises all of them are listed), and the row
// of every ranged flag states its range as the help prints it ("at least
// `1s`", "`1..5`").
func TestReferenceStatesFlagRanges(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../../docs/reference.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, _ := strings.Cut(string(doc), "\n## `jetgate serve` flags\n")
	section, _, _ = strings.Cut(section, "\n## ")
	rows := map[string]string{}
	for _, line := range strings.Split(section, "\n") {
		if rest, ok := strings.CutPrefix(line, "| `--"); ok {
			name, _, _ := strings.Cut(rest, "`")
			name, _, _ = strings.Cut(name, " ")
			rows[name] = line
		}
	}
	var cfg app.Config
	newServeFlags(&cfg).VisitAll(func(f *flag.Flag) {
		row, found := rows[f.Name]
		if !found {
			t.Errorf("docs/reference.md has no row for --%s", f.Name)
			return
		}
		r, ok := f.Value.(ranged)
		if !ok {
			return
		}
		text := r.rangeText()
		want := "`" + text + "`"
		if least, ok := strings.CutPrefix(text, "at least "); ok {
			want = "at least `" + least + "`"
		}
		if !strings.Contains(row, want) {
			t.Errorf("docs/reference.md's row of --%s does not state %s:\n%s", f.Name, want, row)
		}
	})
}

// TestBoundedValue: the parsing and printing of a bounded flag on its own.
func TestBoundedValue(t *testing.T) {
	t.Parallel()
	var d time.Duration
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	durationAtLeast(fs, &d, "d", time.Minute, time.Second, "")
	if f := fs.Lookup("d"); f.DefValue != "1m0s" || d != time.Minute {
		t.Fatalf("default %q, value %v", f.DefValue, d)
	}
	for _, in := range []string{"soon", "", "0", "500ms"} {
		if err := fs.Set("d", in); err == nil {
			t.Errorf("Set(%q) accepted", in)
		}
	}
	if d != time.Minute {
		t.Fatalf("a refused value was stored: %v", d)
	}
	if err := fs.Set("d", " 2s "); err != nil || d != 2*time.Second {
		t.Fatalf("Set(2s) = %v, %v", d, err)
	}
	var n int64
	sizeAtLeast(fs, &n, "n", 0, 0, "")
	for in, want := range map[string]int64{"0": 0, "1KiB": 1024, "2MB": 2e6} {
		if err := fs.Set("n", in); err != nil || n != want {
			t.Errorf("Set(%q) = %d, %v; want %d", in, n, err, want)
		}
	}
	for _, in := range []string{"-1", "--1", "-", "1TiB"} {
		if err := fs.Set("n", in); err == nil {
			t.Errorf("Set(%q) accepted", in)
		}
	}
	var zero *bounded[int]
	if zero.String() != "" || (&bounded[int]{}).String() != "" {
		t.Error("String of a zero bounded is not empty")
	}
	if n, err := parseSignedSize("-2KiB"); err != nil || n != -2048 {
		t.Errorf("parseSignedSize(-2KiB) = %d, %v", n, err)
	}
}
