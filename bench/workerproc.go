package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// The worker of a drain scenario runs in a process of its own, as the
// workers users compare with other queues do (an OJS SDK worker, a Go
// service with the client): the drain is bound by how long a fetch and an
// ack take under load, and a worker in jetgate's process would wait for
// its turn in jetgate's Go scheduler, which no deployment does. The bench
// starts its own executable with $JETGATE_INTERNAL_BENCH_WORKER set to the
// workerSpec; the executable's main (jetgate) or TestMain (the tests of
// the packages that run drains) calls RunWorkerProcess first, which runs
// the drain, writes its Sample to stdout as JSON and exits. The inserts
// stay in the bench process; raw JetStream's worker runs apart too, so
// both sides are measured alike. Params.InProcessWorkers (jetgate bench
// --in-process-workers) runs the workers in the bench process instead.

// workerEnv is the variable that carries a worker process's spec. It is
// not JETGATE_BENCH_*: those are the bench's flags (JETGATE_BENCH_WORKERS
// is --workers).
const workerEnv = "JETGATE_INTERNAL_BENCH_WORKER"

// Kinds of drain worker.
const (
	workerSDKHTTP = "sdk-http" // SDK-style worker over jetgate's HTTP API
	workerSDKRaw  = "sdk-raw"  // the same on a raw JetStream pull consumer
	workerGoNATS  = "go-nats"  // client.Worker over the NATS binding
)

// workerSpec is one drain's worker: what it drains and how.
type workerSpec struct {
	Kind string `json:"kind"`
	// URL is jetgate's HTTP base URL (sdk-http) or the NATS server's
	// (sdk-raw, go-nats).
	URL string `json:"url"`
	// Queue is jetgate's queue (sdk-http, go-nats); Stream and Consumer
	// the raw pull consumer (sdk-raw).
	Queue    string `json:"queue,omitempty"`
	Stream   string `json:"stream,omitempty"`
	Consumer string `json:"consumer,omitempty"`
	// WorkerID is the worker's id at jetgate.
	WorkerID string `json:"worker_id,omitempty"`
	Jobs     int    `json:"jobs"`
	Handlers int    `json:"handlers"`
	// Timeout bounds the drain.
	Timeout time.Duration `json:"timeout_ns"`
}

// run drains spec's jobs in this process. nc, when not nil, is the NATS
// connection of a raw worker (a process of its own dials one).
func (spec workerSpec) run(ctx context.Context, nc *nats.Conn) (Sample, error) {
	if spec.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, spec.Timeout)
		defer cancel()
	}
	switch spec.Kind {
	case workerSDKHTTP:
		hc := keepAliveClient(spec.Handlers + 2)
		defer hc.CloseIdleConnections()
		return sdkHTTPDrain(ctx, hc, spec)
	case workerSDKRaw:
		if nc == nil {
			c, err := nats.Connect(spec.URL, nats.Name("jetgate bench raw worker"))
			if err != nil {
				return Sample{}, fmt.Errorf("connect raw worker: %w", err)
			}
			defer c.Close()
			nc = c
		}
		js, err := jetstream.New(nc)
		if err != nil {
			return Sample{}, err
		}
		cons, err := js.Consumer(ctx, spec.Stream, spec.Consumer)
		if err != nil {
			return Sample{}, fmt.Errorf("raw consumer %s: %w", spec.Consumer, err)
		}
		return sdkRawDrain(ctx, cons, spec.Jobs, spec.Handlers)
	case workerGoNATS:
		// The Go client always has a connection of its own.
		cl, closeConn, err := goClient(spec.URL, "jetgate bench Go worker")
		if err != nil {
			return Sample{}, err
		}
		defer closeConn()
		return workerDrain(ctx, cl, spec.Queue, spec.WorkerID, spec.Jobs, spec.Handlers)
	}
	return Sample{}, fmt.Errorf("unknown drain worker %q", spec.Kind)
}

// drainWith runs spec's worker in a process of its own, or in this one
// when inProcess is set (with nc as a raw worker's connection).
func drainWith(ctx context.Context, spec workerSpec, inProcess bool, nc *nats.Conn) (Sample, error) {
	if inProcess {
		return spec.run(ctx, nc)
	}
	return spec.runApart(ctx)
}

// runApart runs spec in a worker process and returns its Sample. The
// process is killed when ctx ends, and exits by itself when this process
// dies (its stdin closes).
func (spec workerSpec) runApart(ctx context.Context) (Sample, error) {
	if d, ok := ctx.Deadline(); ok {
		spec.Timeout = time.Until(d)
	}
	raw, err := json.Marshal(spec)
	if err != nil {
		return Sample{}, err
	}
	exe, err := os.Executable()
	if err != nil {
		return Sample{}, fmt.Errorf("drain worker process: %w", err)
	}
	stdin, hold, err := os.Pipe()
	if err != nil {
		return Sample{}, err
	}
	defer hold.Close() // the worker's stdin closes with this end
	cmd := exec.CommandContext(ctx, exe)
	cmd.Env = append(os.Environ(), workerEnv+"="+string(raw))
	var out, errOut bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, &out, &errOut
	cmd.WaitDelay = 5 * time.Second
	err = cmd.Start()
	stdin.Close()
	if err == nil {
		err = cmd.Wait()
	}
	if err != nil {
		return Sample{}, fmt.Errorf("drain worker process: %w: %s", err, strings.TrimSpace(errOut.String()))
	}
	var s Sample
	if err := json.Unmarshal(out.Bytes(), &s); err != nil {
		return Sample{}, fmt.Errorf("drain worker process: its answer: %w", err)
	}
	return s, nil
}

// RunWorkerProcess runs the drain worker this process was started as,
// when $JETGATE_INTERNAL_BENCH_WORKER is set, and exits: 0 after writing the
// drain's Sample to stdout, 1 after writing the error to stderr. Without
// the variable it returns at once. jetgate's main and the TestMain of
// packages whose tests run drain scenarios call it before anything else.
func RunWorkerProcess() {
	raw, ok := os.LookupEnv(workerEnv)
	if !ok {
		return
	}
	os.Exit(workerProcess(raw, os.Stdin, os.Stdout, os.Stderr))
}

func workerProcess(raw string, stdin io.Reader, stdout, stderr io.Writer) int {
	var spec workerSpec
	if err := json.Unmarshal([]byte(raw), &spec); err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", workerEnv, err)
		return 1
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// The bench process holds the other end of stdin: EOF means it is
	// gone (or gave up), and so is the point of draining.
	go func() {
		_, _ = io.Copy(io.Discard, stdin)
		cancel()
	}()
	s, err := spec.run(ctx, nil)
	if err == nil {
		err = json.NewEncoder(stdout).Encode(s)
	}
	if err != nil {
		if errors.Is(err, context.Canceled) {
			err = fmt.Errorf("%w (the bench process is gone)", err)
		}
		fmt.Fprintln(stderr, err)
		return 1
	}
	return 0
}
