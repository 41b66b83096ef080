package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jetgate/jetgate/cmd/jetgate/app"
	"github.com/jetgate/jetgate/natsbind"
)

// envPrefix prefixes the environment variable of every flag:
// --data-dir is JETGATE_DATA_DIR.
const envPrefix = "JETGATE_"

// envName returns the environment variable that sets a serve flag.
func envName(flag string) string {
	return envPrefix + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// benchEnvName returns the environment variable that sets a bench flag:
// --nats-url is JETGATE_BENCH_NATS_URL, so the JETGATE_NATS_URL of a
// server's environment never points a benchmark at its NATS.
func benchEnvName(flag string) string { return envName("bench-" + flag) }

// flagGroup lists flags in the order the help shows them; arg names the
// flag's value in the help ("" for none).
type flagGroup struct {
	title string
	flags [][2]string // name, arg
}

var serveGroups = []flagGroup{
	{"Server", [][2]string{
		{"http-addr", "HOST:PORT"}, {"tls-cert", "FILE"}, {"tls-key", "FILE"}, {"data-dir", "DIR"}, {"nats-addr", "HOST:PORT"}, {"nats-auth-token", "TOKEN"}, {"nats-nkey", "FILE"}, {"instance-name", "NAME"},
		{"dashboard", ""},
	}},
	{"Access control (HTTP bearer tokens; none configured: off)", [][2]string{
		{"auth-tokens-file", "FILE"}, {"producer-token", "TOKEN"}, {"worker-token", "TOKEN"}, {"admin-token", "TOKEN"},
	}},
	{"NATS API (the OJS operations as the NATS micro service \"ojs\"; same tokens as HTTP)", [][2]string{
		{"nats-api", ""}, {"nats-api-prefix", "SUBJECT"},
	}},
	{"External NATS (instead of the embedded server)", [][2]string{
		{"nats-url", "URLS"}, {"nats-creds", "FILE"}, {"nats-user", "USER"},
		{"nats-password", "PASSWORD"}, {"nats-token", "TOKEN"}, {"nats-tls-cert", "FILE"},
		{"nats-tls-key", "FILE"}, {"nats-tls-ca", "FILE"}, {"replicas", "N"},
	}},
	{"Jobs and requests", [][2]string{
		{"default-timeout", "DURATION"}, {"default-grace-period", "DURATION"},
		{"default-heartbeat-timeout", "DURATION"}, {"claim-ack-wait", "DURATION"}, {"retention", "DURATION"}, {"dead-retention", "DURATION"},
		{"max-body-bytes", "SIZE"}, {"max-fetch-count", "N"}, {"shutdown-timeout", "DURATION"},
	}},
	{"Backpressure (default bound of queues without their own)", [][2]string{
		{"queue-max-depth", "N"}, {"queue-max-size-bytes", "SIZE"}, {"queue-overflow", "STRATEGY"},
		{"queue-count-active", ""}, {"max-block-timeout", "DURATION"},
	}},
	{"Events (GET /ojs/v1/events; events are published on NATS either way)", [][2]string{
		{"events-stream", ""}, {"events-max-age", "DURATION"}, {"events-max-msgs", "N"}, {"events-max-bytes", "SIZE"},
		{"events-buffer", "N"}, {"events-buffer-bytes", "SIZE"}, {"events-idle", "DURATION"},
		{"events-own", "N"}, {"events-own-bytes", "SIZE"},
	}},
	{"Tracing (OpenTelemetry; a request's traceparent reaches its jobs' meta either way)", [][2]string{
		{"otel-traces-endpoint", "URL"}, {"otel-traces-sample-ratio", "RATIO"},
	}},
	{"Logging and profiling", [][2]string{{"log-level", "LEVEL"}, {"log-format", "FORMAT"}, {"pprof-addr", "HOST:PORT"}}},
	{"Go runtime (the collector's tuning; GOGC and GOMEMLIMIT work too)", [][2]string{{"gc-percent", "N"}, {"memory-limit", "SIZE"}}},
}

// newServeFlags defines every serve flag on a new FlagSet writing into cfg.
func newServeFlags(cfg *app.Config) *flag.FlagSet {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}

	fs.StringVar(&cfg.HTTPAddr, "http-addr", "127.0.0.1:8080", "Address the OJS HTTP API listens on. Use 0.0.0.0:8080 to accept other hosts.")
	fs.StringVar(&cfg.TLSCert, "tls-cert", "", "PEM certificate (chain) the HTTP API serves HTTPS with (with --tls-key). SIGHUP reloads both files without dropping the listener.")
	fs.StringVar(&cfg.TLSKey, "tls-key", "", "PEM private key of --tls-cert.")
	fs.StringVar(&cfg.DataDir, "data-dir", "./jetgate-data", "Directory where the embedded NATS server keeps its JetStream data (created if missing). Unused with --nats-url.")
	fs.StringVar(&cfg.NatsAddr, "nats-addr", "127.0.0.1:4222", "Address the embedded NATS server listens on, so the nats CLI and other NATS clients can reach it. Unused with --nats-url.")
	fs.StringVar(&cfg.NatsAuthToken, "nats-auth-token", "", "Token the embedded NATS server requires of every client (jetgate's own connection sends it), instead of the nkey seed it requires when bearer tokens are configured. Unused with --nats-url. Prefer the environment variable.")
	fs.StringVar(&cfg.InstanceName, "instance-name", "", "Name of this jetgate process in events and metrics (default: the host name).")
	fs.Var((*notBool)(&cfg.DisableDashboard), "dashboard", "Serve the live web dashboard at / (admin token needed when tokens are configured; docs/dashboard.md). --dashboard=false turns it off.")

	fs.StringVar(&cfg.AuthTokensFile, "auth-tokens-file", "", "File of HTTP bearer tokens, one \"role token\" line each (role: producer, worker or admin; # starts a comment). Merged with the token flags. No token at all: access control off.")
	fs.Var((*tokenList)(&cfg.ProducerTokens), "producer-token", "Bearer token of the producer role (enqueue, read and cancel jobs). Repeatable or comma-separated. Prefer the file or the environment variable: flags show up in process lists.")
	fs.Var((*tokenList)(&cfg.WorkerTokens), "worker-token", "Bearer token of the worker role (fetch, ack, nack, heartbeat, progress). Repeatable or comma-separated.")
	fs.Var((*tokenList)(&cfg.AdminTokens), "admin-token", "Bearer token of the admin role (everything). Repeatable or comma-separated.")

	fs.Var((*notBool)(&cfg.NoNatsAPI), "nats-api", "Serve every OJS operation as the NATS micro service \"ojs\" on jetgate's NATS connection (nats micro info ojs; nats req ojs.v1.jobs.enqueue '{...}'). --nats-api=false turns it off.")
	fs.StringVar(&cfg.NatsAPIPrefix, "nats-api-prefix", "ojs.v1", "Subject prefix of the NATS API's endpoints: <prefix>.jobs.enqueue, <prefix>.workers.fetch, ...")

	fs.StringVar(&cfg.NatsURL, "nats-url", "", "Comma-separated NATS server URLs. When set, jetgate uses this NATS (cluster) and starts no embedded server.")
	fs.StringVar(&cfg.NatsCreds, "nats-creds", "", "NATS credentials file (JWT and nkey seed) to authenticate with.")
	fs.StringVar(&cfg.NatsNKey, "nats-nkey", "", "File holding an nkey user seed (mode 0600). With the embedded server: the one user it accepts (default when bearer tokens are configured: <data-dir>/nats-user.nk, created at first start; the nats CLI connects with --nkey FILE). With --nats-url: the seed to authenticate with.")
	fs.StringVar(&cfg.NatsUser, "nats-user", "", "NATS user name (with --nats-password).")
	fs.StringVar(&cfg.NatsPassword, "nats-password", "", "NATS password. Prefer the environment variable: flags show up in process lists.")
	fs.StringVar(&cfg.NatsToken, "nats-token", "", "NATS authentication token. Prefer the environment variable.")
	fs.StringVar(&cfg.NatsTLSCert, "nats-tls-cert", "", "Client certificate for TLS to NATS (with --nats-tls-key).")
	fs.StringVar(&cfg.NatsTLSKey, "nats-tls-key", "", "Private key of --nats-tls-cert.")
	fs.StringVar(&cfg.NatsTLSCA, "nats-tls-ca", "", "CA certificate to verify the NATS servers with.")
	intWithin(fs, &cfg.Replicas, "replicas", 1, 1, 5, "Replicas of every stream and bucket jetgate creates: 3 on a 3-node cluster. Must be 1 with the embedded server.")

	durationAtLeast(fs, &cfg.DefaultTimeout, "default-timeout", 30*time.Minute, time.Second, "Execution timeout of jobs that set none: how long one attempt may run before its worker is told to cancel it.")
	durationAtLeast(fs, &cfg.DefaultGracePeriod, "default-grace-period", 30*time.Second, 0, "Grace period of jobs that set none: how long a worker told to cancel has before the attempt is ended as timed out (0s: none).")
	durationAtLeast(fs, &cfg.DefaultHeartbeatTimeout, "default-heartbeat-timeout", time.Minute, time.Second, "How long a worker may stay silent (no heartbeat, progress, ack or nack) on a job that sets no heartbeat or visibility timeout before the job is stalled.")
	durationAtLeast(fs, &cfg.ClaimAckWait, "claim-ack-wait", 30*time.Second, time.Second, "How long a fetched job's ready message stays unacknowledged before JetStream may hand it out again. A job still running after a third of it gets its lease timer written; a job whose jetgate process died is timed out at most this long after its deadline. Use the same value on every process of one NATS.")
	durationWithin(fs, &cfg.Retention, "retention", 24*time.Hour, time.Second, app.MaxRetention, "How long completed and cancelled jobs stay readable (GET /ojs/v1/jobs/{id}) before JetStream removes them.")
	durationWithin(fs, &cfg.DeadRetention, "dead-retention", 7*24*time.Hour, time.Second, app.MaxRetention, "How long discarded jobs stay in the dead letter queue before JetStream removes them.")
	sizeAtLeast(fs, &cfg.MaxBodyBytes, "max-body-bytes", 1<<20, 1<<10, "Largest HTTP request body accepted, in bytes or with a unit: 512KiB, 4MiB, 1MB.")
	intAtLeast(fs, &cfg.MaxFetchCount, "max-fetch-count", 1000, 1, "Most jobs one worker fetch returns. A fetch asking for more (an SDK asks for as many as it has free handlers) is served up to this many, never refused.")
	durationAtLeast(fs, &cfg.ShutdownTimeout, "shutdown-timeout", 30*time.Second, time.Second, "On SIGINT or SIGTERM, how long to let in-flight requests finish before stopping.")

	int64AtLeast(fs, &cfg.QueueMaxDepth, "queue-max-depth", 0, 0, "Default max_depth of queues without their own bound: jobs counted against it at once (0: unbounded).")
	sizeAtLeast(fs, &cfg.QueueMaxSizeBytes, "queue-max-size-bytes", 0, 0, "Default max_size_bytes of queues without their own bound: total size of their jobs (0: unbounded).")
	fs.BoolVar(&cfg.QueueCountActive, "queue-count-active", false, "Count running (active) jobs against the default bound too, so a retry never finds its queue full; by default depth is available + scheduled + retryable, as the spec counts it.")
	fs.StringVar(&cfg.QueueOverflow, "queue-overflow", "reject", "What a full queue does with a new job by default: reject (429), block (wait up to OJS-Block-Timeout) or drop_oldest.")
	durationAtLeast(fs, &cfg.MaxBlockTimeout, "max-block-timeout", 30*time.Second, time.Millisecond, "Longest a producer may wait for room in a full queue with the block strategy, whatever its OJS-Block-Timeout.")

	fs.BoolVar(&cfg.EventsStream, "events-stream", false, "Store every lifecycle event in the stream OJS_EVENTS (memory storage, 3 stored messages per job) and serve GET /ojs/v1/events from it. Off by default: that endpoint then lists this process's own last events (--events-own) and other processes' events published after its first read (an in-memory capture that runs while someone reads).")
	durationAtLeast(fs, &cfg.EventsMaxAge, "events-max-age", 24*time.Hour, time.Second, "With --events-stream: how long OJS_EVENTS keeps an event.")
	int64AtLeast(fs, &cfg.EventsMaxMsgs, "events-max-msgs", 100_000, 1, "With --events-stream: most events OJS_EVENTS keeps, oldest dropped first.")
	sizeAtLeast(fs, &cfg.EventsMaxBytes, "events-max-bytes", 64<<20, 1<<10, "With --events-stream: most memory OJS_EVENTS uses, oldest events dropped first.")
	intAtLeast(fs, &cfg.EventsBuffer, "events-buffer", 10_000, 1, "Without --events-stream: most events the in-memory capture keeps, oldest dropped first.")
	sizeAtLeast(fs, &cfg.EventsBufferBytes, "events-buffer-bytes", 16<<20, 1<<10, "Without --events-stream: most memory the in-memory capture uses, oldest events dropped first.")
	intAtLeast(fs, &cfg.EventsOwn, "events-own", 1000, 0, "How many of the events it emitted itself this process keeps in memory for GET /ojs/v1/events, heard on NATS or not, so that a first read lists them (0: none). No NATS message, nothing stored.")
	sizeAtLeast(fs, &cfg.EventsOwnBytes, "events-own-bytes", 4<<10, 1<<10, "Most memory one of those events takes: a larger one is kept with its result left out (result_omitted) or its data cut down (data_truncated).")
	durationAtLeast(fs, &cfg.EventsIdle, "events-idle", 10*time.Minute, time.Second, "Without --events-stream: the capture stops, freeing its memory, after this long without a read of GET /ojs/v1/events; the next read starts it again.")

	fs.StringVar(&cfg.TracesEndpoint, "otel-traces-endpoint", "", "OTLP/HTTP endpoint to export spans to (e.g. http://collector:4318/v1/traces): a span per HTTP request, a child of its traceparent; enqueue stamps it into meta.traceparent. Empty: no spans.")
	ratioFlag(fs, &cfg.TracesSampleRatio, "otel-traces-sample-ratio", 1, "Share of traces started here (requests without a traceparent) that are recorded, 0..1; requests with one follow its sampled flag.")

	fs.StringVar(&cfg.LogLevel, "log-level", "info", "Least severe log level written to stderr: debug, info, warn or error.")
	fs.StringVar(&cfg.LogFormat, "log-format", "text", "Log format: text (key=value) or json.")
	fs.StringVar(&cfg.PprofAddr, "pprof-addr", "", "Serve Go's net/http/pprof profiles (heap, CPU, goroutines) on this loopback address, e.g. 127.0.0.1:6060 (go tool pprof http://127.0.0.1:6060/debug/pprof/heap). Off by default; a non-loopback host is refused.")
	fs.Var((*gcPercent)(&cfg.Runtime.GCPercent), "gc-percent", fmt.Sprintf("Go collector target (GOGC): auto (GOGC if set, else %d: a job is short-lived garbage, and the default 100 spent a quarter of a drain's CPU collecting), a number from 10, or off (only under a memory limit).", app.DefaultGCPercent))
	fs.Var((*memoryLimit)(&cfg.Runtime.MemoryLimit), "memory-limit", "Soft memory limit of the process (GOMEMLIMIT), the collector works harder near it: auto (GOMEMLIMIT if set, else 3/4 of the cgroup's memory limit or of the machine's memory, whichever is less), none, or a size such as 4GiB.")
	return fs
}

// parseServe reads the serve flags, then the JETGATE_* environment variables
// of the flags not given (empty variables count as unset), then defaults.
func parseServe(args []string, lookupEnv func(string) (string, bool)) (app.Config, error) {
	var cfg app.Config
	fs := newServeFlags(&cfg)
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	if fs.NArg() > 0 {
		return cfg, fmt.Errorf("serve takes no arguments, got %q", fs.Arg(0))
	}
	if err := applyEnv(fs, envName, lookupEnv); err != nil {
		return cfg, err
	}
	if cfg.DefaultGracePeriod == 0 {
		cfg.DefaultGracePeriod = -1 // "0s": no grace period (app.Config reads 0 as the default)
	}
	if cfg.EventsOwn == 0 {
		cfg.EventsOwn = -1 // "0": keep none (app.Config reads 0 as the default)
	}
	return cfg, validateServe(cfg)
}

// applyEnv sets every flag of fs not given on the command line from its
// environment variable envOf(name), if set and not empty.
func applyEnv(fs *flag.FlagSet, envOf func(string) string, lookupEnv func(string) (string, bool)) error {
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	var errs []error
	fs.VisitAll(func(f *flag.Flag) {
		env := envOf(f.Name)
		v, ok := lookupEnv(env)
		if given[f.Name] || !ok || v == "" {
			return
		}
		if err := f.Value.Set(v); err != nil {
			errs = append(errs, fmt.Errorf("invalid value %q for %s (--%s): %v", v, env, f.Name, err))
		}
	})
	return errors.Join(errs...)
}

// validateServe checks what the command itself uses; app.Run validates the
// rest of the config.
func validateServe(cfg app.Config) error {
	if _, err := parseLevel(cfg.LogLevel); err != nil {
		return fmt.Errorf("--log-level (%s): %w", envName("log-level"), err)
	}
	if cfg.LogFormat != "text" && cfg.LogFormat != "json" {
		return fmt.Errorf("--log-format (%s) must be text or json, got %q", envName("log-format"), cfg.LogFormat)
	}
	if err := natsbind.ValidPrefix(cmp.Or(cfg.NatsAPIPrefix, natsbind.DefaultPrefix)); err != nil {
		return fmt.Errorf("--nats-api-prefix (%s): %w", envName("nats-api-prefix"), err)
	}
	if err := cfg.Runtime.Validate(); err != nil {
		return fmt.Errorf("--gc-percent (%s), --memory-limit (%s): %w", envName("gc-percent"), envName("memory-limit"), err)
	}
	if cfg.PprofAddr != "" {
		if err := loopbackAddr(cfg.PprofAddr); err != nil {
			return fmt.Errorf("--pprof-addr (%s): %w", envName("pprof-addr"), err)
		}
	}
	return nil
}

func runServe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg, err := parseServe(args, os.LookupEnv)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(stdout, serveUsage())
		return nil
	}
	if err != nil {
		// The full help is long: a pointer to it keeps the error in view.
		fmt.Fprint(stderr, serveShortUsage)
		return err
	}
	logger, err := newLogger(stderr, cfg.LogLevel, cfg.LogFormat)
	if err != nil {
		return err
	}
	rt := app.TuneRuntime(cfg.Runtime, os.LookupEnv, app.MemoryCeiling)
	logger.Info("go runtime", "gc_percent", rt.GCPercent, "gc_percent_from", rt.GCSource, "memory_limit_bytes", rt.MemoryLimit, "memory_limit_from", rt.LimitSource)
	if cfg.PprofAddr != "" {
		stop, err := servePprof(cfg.PprofAddr, logger)
		if err != nil {
			return err
		}
		defer stop()
	}
	s, err := app.Start(ctx, cfg, logger)
	if err != nil {
		return err
	}
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		reloadOnSignal(hup, done, s.ReloadTLS, logger)
	}()
	defer func() {
		signal.Stop(hup)
		close(done)
		wg.Wait()
	}()
	return s.Wait(ctx)
}

// reloadOnSignal calls reload on every signal from sig until done is
// closed, logging the outcome (a failed reload keeps the old certificate).
func reloadOnSignal(sig <-chan os.Signal, done <-chan struct{}, reload func() error, log *slog.Logger) {
	for {
		select {
		case <-done:
			return
		case <-sig:
			if err := reload(); err != nil {
				log.Error("SIGHUP: TLS reload failed, the current certificate stays", "error", err)
			} else {
				log.Info("SIGHUP: TLS certificate reloaded")
			}
		}
	}
}

// newLogger returns a text or json slog logger writing to w at level.
func newLogger(w io.Writer, level, format string) (*slog.Logger, error) {
	lvl, err := parseLevel(level)
	if err != nil {
		return nil, err
	}
	opts := &slog.HandlerOptions{Level: lvl}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	default:
		return nil, fmt.Errorf("log format must be text or json, got %q", format)
	}
}

func parseLevel(s string) (slog.Level, error) {
	switch strings.ToLower(s) {
	case "debug":
		return slog.LevelDebug, nil
	case "info":
		return slog.LevelInfo, nil
	case "warn", "warning":
		return slog.LevelWarn, nil
	case "error":
		return slog.LevelError, nil
	default:
		return 0, fmt.Errorf("log level must be debug, info, warn or error, got %q", s)
	}
}

// tokenList is a repeatable, comma-separated flag of tokens. Its String
// never shows the tokens (the help prints defaults through it).
type tokenList []string

func (l *tokenList) String() string { return "" }

// Set appends the comma-separated tokens of v; it never fails, so no
// error message can echo a token (authz.NewKeyring rejects bad ones
// without naming them).
func (l *tokenList) Set(v string) error {
	for _, t := range strings.Split(v, ",") {
		if t = strings.TrimSpace(t); t != "" {
			*l = append(*l, t)
		}
	}
	return nil
}

// notBool is a boolean flag stored inverted, so that a Config field whose
// zero value means "on" (DisableDashboard, NoNatsAPI) backs a flag whose
// default is true.
type notBool bool

func (b *notBool) String() string {
	if b == nil {
		return "true"
	}
	return strconv.FormatBool(!bool(*b))
}

func (b *notBool) Set(v string) error {
	on, err := strconv.ParseBool(v)
	if err != nil {
		return fmt.Errorf("want true or false, got %q", v)
	}
	*b = notBool(!on)
	return nil
}

func (b *notBool) IsBoolFlag() bool { return true }
