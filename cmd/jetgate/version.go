package main

import (
	"github.com/jetgate/jetgate/cmd/jetgate/app"

	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"

	"github.com/nats-io/nats-server/v2/server"
)

// version is set at build time:
//
//	go build -ldflags "-X main.version=v1.2.3" ./cmd/jetgate
var version = "dev"

const versionUsage = `Usage:
  jetgate version

Prints the jetgate version, the git commit it was built from, the Go
version and the version of the embedded nats-server.
`

// buildInfo is what "jetgate version" reports.
type buildInfo struct {
	Version, Commit, CommitTime, GoVersion, NATSServer string
	Modified                                           bool
}

func readBuildInfo() buildInfo {
	b := buildInfo{Version: version, Commit: "unknown", GoVersion: runtime.Version(), NATSServer: server.VERSION}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return b
	}
	if b.Version == "dev" {
		b.Version = app.Version
	}
	if b.Version == app.Version && info.Main.Version != "" && info.Main.Version != "(devel)" {
		b.Version = info.Main.Version // go install github.com/jetgate/jetgate/cmd/jetgate@vX
	}
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			b.Commit = s.Value
		case "vcs.time":
			b.CommitTime = s.Value
		case "vcs.modified":
			b.Modified = s.Value == "true"
		}
	}
	return b
}

func runVersion(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("version", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	if err := fs.Parse(args); err != nil {
		return usageError(err, versionUsage, stdout, stderr)
	}
	if fs.NArg() > 0 {
		fmt.Fprint(stderr, versionUsage)
		return fmt.Errorf("version takes no arguments, got %q", fs.Arg(0))
	}
	b := readBuildInfo()
	commit := b.Commit
	if b.Modified {
		commit += " (modified)"
	}
	if b.CommitTime != "" {
		commit += ", " + b.CommitTime
	}
	fmt.Fprintf(stdout, "jetgate %s\ncommit:      %s\ngo:          %s\nnats-server: %s\n",
		b.Version, commit, b.GoVersion, b.NATSServer)
	return nil
}

// usageError handles a flag parse error: help goes to stdout and is no
// error; anything else prints the usage to stderr and returns the error.
func usageError(err error, usage string, stdout, stderr io.Writer) error {
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(stdout, usage)
		return nil
	}
	fmt.Fprint(stderr, usage)
	return err
}
