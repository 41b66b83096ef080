package main

import (
	"context"
	"fmt"
	"io"
)

const about = `jetgate is an Open Job Spec (OJS) job server built on NATS JetStream.
Producers enqueue jobs and workers fetch, acknowledge and fail them over
HTTP; every job, queue and rate limit is kept in JetStream, so jetgate
processes hold no state of their own. By default "jetgate serve" runs an
embedded NATS server that stores its data in --data-dir; point --nats-url
at a NATS cluster to run any number of jetgate processes side by side.`

const topUsage = about + `

Usage:
  jetgate <command> [flags]

Commands:
  serve     run the OJS HTTP server (with an embedded NATS server by default)
  bench     measure jetgate against raw JetStream on this machine
  load      overload jetgate's HTTP API and check it degrades as documented
  version   print the version, git commit and Go version
  help      show this help, or "jetgate help <command>" for a command's

Commands that talk to a running jetgate over NATS (--nats-url):
  jobs      get, cancel, patch or list jobs
  enqueue   enqueue a job
  queues    list queues, show their stats, pause or resume them
  limits    list, show or override rate limit keys
  events    tail the live lifecycle events
  streams   report jetgate's streams, buckets and consumers, and check them

Run "jetgate serve --help" for every serve flag and its environment variable,
"jetgate bench --help" for the benchmark scenarios.
`

// command is a subcommand: its help text and what it does with its args.
type command struct {
	usage string
	run   func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

func commands() map[string]command {
	return map[string]command{
		"serve":   {usage: serveUsage(), run: runServe},
		"bench":   {usage: benchUsage(), run: runBench},
		"load":    {usage: loadUsage(), run: runLoad},
		"version": {usage: versionUsage, run: runVersion},
		"help":    {usage: helpUsage, run: runHelp},
		"jobs":    jobsCommand(),
		"enqueue": enqueueCommand(),
		"queues":  queuesCommand(),
		"limits":  limitsCommand(),
		"events":  eventsCommand(),
		"streams": streamsCommand(),
	}
}

// run is the whole program: main only adds os.Args, the standard streams,
// a context cancelled by SIGINT/SIGTERM, and the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, topUsage)
		return fmt.Errorf("missing command")
	}
	switch name := args[0]; name {
	case "-h", "-help", "--help":
		fmt.Fprint(stdout, topUsage)
		return nil
	default:
		cmd, ok := commands()[name]
		if !ok {
			fmt.Fprint(stderr, topUsage)
			return fmt.Errorf("unknown command %q", name)
		}
		return cmd.run(ctx, args[1:], stdout, stderr)
	}
}

const helpUsage = `Usage:
  jetgate help [command]

Shows what jetgate is and its commands, or the flags of one command.
`

func runHelp(_ context.Context, args []string, stdout, stderr io.Writer) error {
	switch len(args) {
	case 0:
		fmt.Fprint(stdout, topUsage)
		return nil
	case 1:
		cmd, ok := commands()[args[0]]
		if !ok {
			fmt.Fprint(stderr, topUsage)
			return fmt.Errorf("unknown command %q", args[0])
		}
		fmt.Fprint(stdout, cmd.usage)
		return nil
	default:
		fmt.Fprint(stderr, helpUsage)
		return fmt.Errorf("help takes at most one command, got %d", len(args))
	}
}
