package main

import (
	"bytes"
	"context"
	"flag"
	"os"
	"reflect"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/jetgate/jetgate/bench"
	"github.com/jetgate/jetgate/cmd/jetgate/app"
)

// runCmd runs the program with args and returns its stdout, stderr and error.
func runCmd(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	err := run(context.Background(), args, &stdout, &stderr)
	return stdout.String(), stderr.String(), err
}

func TestHelp(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"--help"}, {"-h"}, {"help"}} {
		stdout, stderr, err := runCmd(t, args...)
		if err != nil || stderr != "" {
			t.Fatalf("%v: err = %v, stderr = %q", args, err, stderr)
		}
		for _, want := range []string{"Open Job Spec", "NATS JetStream", "jetgate <command>", "serve", "version"} {
			if !strings.Contains(stdout, want) {
				t.Errorf("%v: help lacks %q:\n%s", args, want, stdout)
			}
		}
	}
}

func TestServeHelpMentionsEveryFlag(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"serve", "--help"}, {"serve", "-h"}, {"help", "serve"}} {
		stdout, stderr, err := runCmd(t, args...)
		if err != nil || stderr != "" {
			t.Fatalf("%v: err = %v, stderr = %q", args, err, stderr)
		}
		var cfg app.Config
		newServeFlags(&cfg).VisitAll(func(f *flag.Flag) {
			for _, want := range []string{"--" + f.Name + " ", envName(f.Name)} {
				if !strings.Contains(stdout, want) {
					t.Errorf("%v: help lacks %q", args, want)
				}
			}
		})
		for _, want := range []string{
			"Open Job Spec", "Examples:", "JETGATE_DATA_DIR, default ./jetgate-data",
			"default 1MiB", "default 30s", "--nats-url nats://", "JETGATE_NATS_URL=",
		} {
			if !strings.Contains(stdout, want) {
				t.Errorf("%v: help lacks %q", args, want)
			}
		}
	}
}

func TestServeGroupsListEveryFlagOnce(t *testing.T) {
	t.Parallel()
	var cfg app.Config
	fs := newServeFlags(&cfg)
	seen := map[string]int{}
	for _, g := range serveGroups {
		for _, f := range g.flags {
			if fs.Lookup(f[0]) == nil {
				t.Errorf("group %q lists undefined flag %q", g.title, f[0])
			}
			seen[f[0]]++
		}
	}
	fs.VisitAll(func(f *flag.Flag) {
		if seen[f.Name] != 1 {
			t.Errorf("flag %q is listed %d times in serveGroups, want 1", f.Name, seen[f.Name])
		}
	})
}

func TestVersion(t *testing.T) {
	t.Parallel()
	stdout, _, err := runCmd(t, "version")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"jetgate ", "commit:", runtime.Version(), "nats-server: 2."} {
		if !strings.Contains(stdout, want) {
			t.Errorf("version output lacks %q:\n%s", want, stdout)
		}
	}
	if stdout, _, err := runCmd(t, "version", "--help"); err != nil || !strings.Contains(stdout, "jetgate version") {
		t.Errorf("version --help: err = %v, stdout = %q", err, stdout)
	}
}

// TestVersionFromLdflags (issue 31): what -ldflags "-X main.version=...
// -X main.commit=..." set (task build, the README's go build line) is what
// `jetgate version` prints; an empty version (task build without a tag)
// falls back to app.Version; and init made app.Version, which the server
// reports (manifest, NATS service, metrics, logs), the printed version.
func TestVersionFromLdflags(t *testing.T) {
	if b := readBuildInfo(); app.Version != b.Version {
		t.Fatalf("app.Version %q, jetgate version %q: init did not make them one", app.Version, b.Version)
	}
	oldVersion, oldCommit := version, commit
	t.Cleanup(func() { version, commit = oldVersion, oldCommit })
	stamped := false // a build with Go's VCS stamp keeps its own commit
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, s := range info.Settings {
			stamped = stamped || s.Key == "vcs.revision"
		}
	}
	version, commit = "v1.2.3", "0123456789abcdef0123456789abcdef01234567-dirty"
	stdout, _, err := runCmd(t, "version")
	if err != nil || !strings.HasPrefix(stdout, "jetgate v1.2.3\n") {
		t.Fatalf("version: %q, %v", stdout, err)
	}
	if !stamped && !strings.Contains(stdout, "commit:      "+commit+"\n") {
		t.Fatalf("version does not print the commit set by -X main.commit:\n%s", stdout)
	}
	version, commit = "", ""
	if b := readBuildInfo(); b.Version != app.Version || (!stamped && b.Commit != "unknown") {
		t.Fatalf("unset version and commit: %+v, want version %q and commit unknown", b, app.Version)
	}
}

// TestResolveVersion: -X main.version wins, then -X app.Version, then the
// module version Go stamped, then the default; and the answer is stable
// when fed back as app.Version (init does that), so an explicit version
// is never replaced by a stamped pseudo-version.
func TestResolveVersion(t *testing.T) {
	t.Parallel()
	const pseudo = "v0.0.0-20261128115954-fb6135d99b1a"
	for _, tc := range []struct{ main, app, module, want string }{
		{"v1.2.3", app.DefaultVersion, pseudo, "v1.2.3"},
		{"v1.2.3", "v9.9.9", "", "v1.2.3"},
		{"dev", "v2.0.0", pseudo, "v2.0.0"},
		{"", app.DefaultVersion, "v1.4.0", "v1.4.0"},
		{"dev", app.DefaultVersion, pseudo, pseudo},
		{"dev", app.DefaultVersion, "(devel)", app.DefaultVersion},
		{"", app.DefaultVersion, "", app.DefaultVersion},
	} {
		got := resolveVersion(tc.main, tc.app, tc.module)
		if got != tc.want {
			t.Errorf("resolveVersion(%q, %q, %q) = %q, want %q", tc.main, tc.app, tc.module, got, tc.want)
		}
		if again := resolveVersion(tc.main, got, tc.module); again != got {
			t.Errorf("resolveVersion(%q, %q, %q) = %q after init, was %q", tc.main, got, tc.module, again, got)
		}
	}
}

func TestUsageErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args    []string
		wantErr string
	}{
		{nil, "missing command"},
		{[]string{"frobnicate"}, `unknown command "frobnicate"`},
		{[]string{"--verbose"}, `unknown command "--verbose"`},
		{[]string{"help", "frobnicate"}, `unknown command "frobnicate"`},
		{[]string{"serve", "--no-such-flag"}, "flag provided but not defined: -no-such-flag"},
		{[]string{"serve", "extra"}, `serve takes no arguments, got "extra"`},
		{[]string{"serve", "--replicas", "three"}, `invalid value "three" for flag -replicas`},
		{[]string{"serve", "--log-level", "loud"}, "JETGATE_LOG_LEVEL"},
		{[]string{"serve", "--log-format", "xml"}, "JETGATE_LOG_FORMAT"},
		{[]string{"version", "--short"}, "flag provided but not defined: -short"},
		{[]string{"version", "now"}, `version takes no arguments, got "now"`},
	} {
		stdout, stderr, err := runCmd(t, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("%v: err = %v, want it to contain %q", tc.args, err, tc.wantErr)
		}
		if !strings.Contains(stderr, "Usage:") {
			t.Errorf("%v: stderr lacks usage: %q", tc.args, stderr)
		}
		if stdout != "" {
			t.Errorf("%v: wrote to stdout: %q", tc.args, stdout)
		}
	}
}

// lookup returns a lookupEnv func over a fixed map.
func lookup(env map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v, ok := env[k]
		return v, ok
	}
}

func TestParseServeDefaults(t *testing.T) {
	t.Parallel()
	cfg, err := parseServe(nil, lookup(nil))
	if err != nil {
		t.Fatal(err)
	}
	want := app.Config{
		DataDir: "./jetgate-data", NatsAddr: "127.0.0.1:4222", HTTPAddr: "127.0.0.1:8080",
		Replicas: 1, ShutdownTimeout: 30 * time.Second, MaxBodyBytes: 1 << 20, MaxFetchCount: 1000,
		LogLevel: "info", LogFormat: "text", DefaultTimeout: 30 * time.Minute, DefaultGracePeriod: 30 * time.Second,
		DefaultHeartbeatTimeout: time.Minute, ClaimAckWait: 30 * time.Second,
		Retention: 24 * time.Hour, DeadRetention: 7 * 24 * time.Hour,
		QueueOverflow: "reject", MaxBlockTimeout: 30 * time.Second,
		// Issue 17: no event stream by default.
		EventsStream: false, EventsMaxAge: 24 * time.Hour, EventsMaxMsgs: 100_000, EventsMaxBytes: 64 << 20,
		EventsBuffer: 10_000, EventsBufferBytes: 16 << 20, EventsIdle: 10 * time.Minute,
		// Issue 32 events: each process keeps its own last 1000 events.
		EventsOwn: 1000, EventsOwnBytes: 4 << 10,
		TracesSampleRatio: 1,
		// Issue 19: the NATS API is on by default, under ojs.v1.
		NoNatsAPI: false, NatsAPIPrefix: "ojs.v1",
	}
	if !reflect.DeepEqual(cfg, want) {
		t.Fatalf("defaults = %+v\nwant       %+v", cfg, want)
	}
}

func TestParseServePrecedence(t *testing.T) {
	t.Parallel()
	env := lookup(map[string]string{
		"JETGATE_DATA_DIR":         "/env/data",
		"JETGATE_HTTP_ADDR":        "0.0.0.0:9000",
		"JETGATE_REPLICAS":         "3",
		"JETGATE_SHUTDOWN_TIMEOUT": "5s",
		"JETGATE_MAX_BODY_BYTES":   "2MiB",
		"JETGATE_NATS_PASSWORD":    "s3cret",
		"JETGATE_LOG_FORMAT":       "", // Empty counts as unset.
		"JETGATE_EVENTS_STREAM":    "true",
		"JETGATE_EVENTS_IDLE":      "1m",
	})
	cfg, err := parseServe([]string{"--data-dir", "/flag/data", "--replicas=5", "-nats-url", "nats://a:4222,nats://b:4222"}, env)
	if err != nil {
		t.Fatal(err)
	}
	for name, got := range map[string][2]any{
		"flag over env":    {cfg.DataDir, "/flag/data"},
		"flag over env 2":  {cfg.Replicas, 5},
		"flag only":        {cfg.NatsURL, "nats://a:4222,nats://b:4222"},
		"env over default": {cfg.HTTPAddr, "0.0.0.0:9000"},
		"env duration":     {cfg.ShutdownTimeout, 5 * time.Second},
		"env byte size":    {cfg.MaxBodyBytes, int64(2 << 20)},
		"env secret":       {cfg.NatsPassword, "s3cret"},
		"empty env":        {cfg.LogFormat, "text"},
		"default":          {cfg.NatsAddr, "127.0.0.1:4222"},
		"env bool":         {cfg.EventsStream, true},
		"env events idle":  {cfg.EventsIdle, time.Minute},
	} {
		if got[0] != got[1] {
			t.Errorf("%s: got %v, want %v", name, got[0], got[1])
		}
	}
}

// TestParseServeTokens (issue 20: tokens by flag or environment, several
// per role): a flag is repeatable and comma-separated; the environment
// variable is comma-separated; the flag wins over the environment.
func TestParseServeTokens(t *testing.T) {
	t.Parallel()
	env := lookup(map[string]string{
		"JETGATE_WORKER_TOKEN":     "w1, w2",
		"JETGATE_ADMIN_TOKEN":      "env-admin",
		"JETGATE_AUTH_TOKENS_FILE": "/etc/jetgate/tokens",
	})
	cfg, err := parseServe([]string{"--producer-token", "p1,p2", "--producer-token=p3", "--admin-token", "a1"}, env)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(cfg.ProducerTokens, []string{"p1", "p2", "p3"}) ||
		!reflect.DeepEqual(cfg.WorkerTokens, []string{"w1", "w2"}) ||
		!reflect.DeepEqual(cfg.AdminTokens, []string{"a1"}) || cfg.AuthTokensFile != "/etc/jetgate/tokens" {
		t.Fatalf("tokens: producer %q worker %q admin %q file %q", cfg.ProducerTokens, cfg.WorkerTokens, cfg.AdminTokens, cfg.AuthTokensFile)
	}
	for _, f := range []string{"producer-token", "worker-token", "admin-token"} {
		if u := serveUsage(); !strings.Contains(u, "--"+f) || !strings.Contains(u, envName(f)) {
			t.Errorf("help lacks --%s or %s", f, envName(f))
		}
	}
}

func TestServeEnvFromProcess(t *testing.T) {
	t.Setenv("JETGATE_LOG_LEVEL", "debug")
	t.Setenv("JETGATE_INSTANCE_NAME", "worker-7")
	cfg, err := parseServe([]string{"--log-level", "warn"}, os.LookupEnv)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.LogLevel != "warn" || cfg.InstanceName != "worker-7" {
		t.Fatalf("log level %q, instance %q; want warn, worker-7", cfg.LogLevel, cfg.InstanceName)
	}
}

func TestServeBadEnvNamesVariable(t *testing.T) {
	for _, tc := range []struct{ env, value string }{
		{"JETGATE_REPLICAS", "three"},
		{"JETGATE_SHUTDOWN_TIMEOUT", "soon"},
		{"JETGATE_MAX_BODY_BYTES", "lots"},
		{"JETGATE_LOG_LEVEL", "loud"},
	} {
		t.Run(tc.env, func(t *testing.T) {
			t.Setenv(tc.env, tc.value)
			_, stderr, err := runCmd(t, "serve")
			if err == nil || !strings.Contains(err.Error(), tc.env) {
				t.Fatalf("err = %v, want it to name %s", err, tc.env)
			}
			if !strings.Contains(stderr, "Usage:") {
				t.Errorf("stderr lacks usage: %q", stderr)
			}
			// A flag wins over the bad variable.
			flagName := "--" + strings.ToLower(strings.ReplaceAll(strings.TrimPrefix(tc.env, envPrefix), "_", "-"))
			good := map[string]string{"--replicas": "1", "--shutdown-timeout": "1s", "--max-body-bytes": "1024", "--log-level": "info"}
			if _, err := parseServe([]string{flagName, good[flagName]}, os.LookupEnv); err != nil {
				t.Errorf("flag %s did not override %s: %v", flagName, tc.env, err)
			}
		})
	}
}

func TestByteSize(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]int64{
		"0": 0, "1024": 1024, "1KiB": 1 << 10, "4MiB": 4 << 20, "2 GiB": 2 << 30,
		"1KB": 1000, "3MB": 3e6, "1GB": 1e9, "10B": 10,
	} {
		var b byteSize
		if err := b.Set(in); err != nil || int64(b) != want {
			t.Errorf("Set(%q) = %d, %v; want %d", in, b, err, want)
		}
	}
	for _, in := range []string{"", "-1", "1.5MiB", "MiB", "1TiB", "9999999999GiB"} {
		var b byteSize
		if err := b.Set(in); err == nil {
			t.Errorf("Set(%q) = %d, want error", in, b)
		}
	}
	for in, want := range map[byteSize]string{0: "0", 1 << 20: "1MiB", 1536: "1536", 3 << 10: "3KiB", 2 << 30: "2GiB"} {
		if got := in.String(); got != want {
			t.Errorf("String(%d) = %q, want %q", int64(in), got, want)
		}
	}
}

func TestNewLogger(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	logger, err := newLogger(&buf, "warn", "json")
	if err != nil {
		t.Fatal(err)
	}
	logger.Info("hidden")
	logger.Warn("shown", "k", "v")
	if out := buf.String(); strings.Contains(out, "hidden") || !strings.Contains(out, `"msg":"shown","k":"v"`) {
		t.Fatalf("json warn logger wrote %q", out)
	}
	buf.Reset()
	logger, err = newLogger(&buf, "DEBUG", "text")
	if err != nil {
		t.Fatal(err)
	}
	logger.Debug("dbg")
	if !strings.Contains(buf.String(), "level=DEBUG msg=dbg") {
		t.Fatalf("text debug logger wrote %q", buf.String())
	}
	if _, err := newLogger(&buf, "info", "yaml"); err == nil {
		t.Fatal("yaml format accepted")
	}
}

// Issue 19: --nats-api (default true) and --nats-api-prefix, and their
// JETGATE_NATS_API / JETGATE_NATS_API_PREFIX variables.
func TestParseServeNatsAPIFlags(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args       []string
		env        map[string]string
		off        bool
		prefix     string
		wantErrSub string
	}{
		{args: nil, prefix: "ojs.v1"},
		{args: []string{"--nats-api=false"}, off: true, prefix: "ojs.v1"},
		{args: []string{"--nats-api"}, prefix: "ojs.v1"},
		{env: map[string]string{"JETGATE_NATS_API": "false", "JETGATE_NATS_API_PREFIX": "acme.ojs"}, off: true, prefix: "acme.ojs"},
		{args: []string{"--nats-api-prefix", "a.b"}, env: map[string]string{"JETGATE_NATS_API_PREFIX": "x.y"}, prefix: "a.b"},
		{args: []string{"--nats-api-prefix", "ojs.*"}, wantErrSub: "nats-api-prefix"},
		{env: map[string]string{"JETGATE_NATS_API": "maybe"}, wantErrSub: "JETGATE_NATS_API"},
	} {
		cfg, err := parseServe(tc.args, lookup(tc.env))
		if tc.wantErrSub != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErrSub) {
				t.Errorf("%v %v: err = %v, want one naming %s", tc.args, tc.env, err, tc.wantErrSub)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%v %v: %v", tc.args, tc.env, err)
		}
		if cfg.NoNatsAPI != tc.off || cfg.NatsAPIPrefix != tc.prefix {
			t.Errorf("%v %v: NoNatsAPI=%v prefix=%q, want %v %q", tc.args, tc.env, cfg.NoNatsAPI, cfg.NatsAPIPrefix, tc.off, tc.prefix)
		}
	}
}

// TestParseServeRuntimeFlags: --gc-percent and --memory-limit default to
// auto (app.TuneRuntime then reads GOGC, GOMEMLIMIT and the cgroup), take
// their JETGATE_ variables, and refuse what the runtime cannot use.
func TestParseServeRuntimeFlags(t *testing.T) {
	t.Parallel()
	cfg, err := parseServe([]string{"--gc-percent", "250", "--memory-limit", "2GiB"}, lookup(map[string]string{"JETGATE_GC_PERCENT": "off"}))
	if err != nil {
		t.Fatal(err)
	}
	if want := (app.Runtime{GCPercent: 250, MemoryLimit: 2 << 30}); cfg.Runtime != want {
		t.Errorf("flags: %+v, want %+v", cfg.Runtime, want)
	}
	cfg, err = parseServe(nil, lookup(map[string]string{"JETGATE_GC_PERCENT": "off", "JETGATE_MEMORY_LIMIT": "512MiB"}))
	if err != nil {
		t.Fatal(err)
	}
	if want := (app.Runtime{GCPercent: -1, MemoryLimit: 512 << 20}); cfg.Runtime != want {
		t.Errorf("env: %+v, want %+v", cfg.Runtime, want)
	}
	cfg, err = parseServe([]string{"--gc-percent", "auto", "--memory-limit", "none"}, lookup(nil))
	if err != nil {
		t.Fatal(err)
	}
	if want := (app.Runtime{GCPercent: 0, MemoryLimit: -1}); cfg.Runtime != want {
		t.Errorf("auto/none: %+v, want %+v", cfg.Runtime, want)
	}
	for _, args := range [][]string{
		{"--gc-percent", "5"}, {"--gc-percent", "lots"}, {"--memory-limit", "0"}, {"--memory-limit", "-3"},
		{"--gc-percent", "off"}, // off needs a limit given with it
	} {
		if _, err := parseServe(args, lookup(nil)); err == nil {
			t.Errorf("%v: no error", args)
		}
	}
}

// TestMain lets this test binary be a drain's worker process: the bench
// tests run drain-http, whose workers are processes of the running
// executable (bench/workerproc.go).
func TestMain(m *testing.M) {
	bench.RunWorkerProcess()
	os.Exit(m.Run())
}
