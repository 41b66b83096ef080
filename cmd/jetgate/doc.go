// Command jetgate is an Open Job Spec (OJS) server on NATS JetStream.
//
// This package is the thin command line: main.go wires os.Args, the
// standard streams and a context cancelled by SIGINT/SIGTERM into run, and
// run dispatches to the subcommands (serve, bench, version, help), each a function
// with injected writers. serve turns flags and JETGATE_* environment
// variables (flag > variable > default) into an app.Config, builds the slog
// logger and hands both to app.Run, which owns everything after that,
// including graceful shutdown when the context is cancelled. bench turns
// its flags into bench.Params and hands them to package bench, which
// starts its own jetgate for the run.
//
// This package never starts servers or touches NATS itself, and only main
// calls os.Exit.
package main
