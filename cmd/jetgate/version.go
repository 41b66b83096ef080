package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/jetgate/jetgate/cmd/jetgate/app"
)

// version and commit are set at build time (task build sets both):
//
//	go build -ldflags "-X main.version=v1.2.3 -X main.commit=$(git rev-parse HEAD)" -o bin/jetgate ./cmd/jetgate
//
// resolveVersion says which version wins when several are set. commit is
// needed only by a build without Go's VCS stamp (vcs.revision, written by
// go build inside a git checkout; absent from a source tarball, a Docker
// context without .git, a git worktree, whose .git is a file Go does not
// read, or -buildvcs=false): the stamp wins when there is one, since it
// also says whether the tree was modified.
var (
	version = "dev"
	commit  = ""
)

// init makes the version `jetgate version` prints the one the server
// reports too: the manifest, the NATS service, metrics, logs and traces
// read app.Version.
func init() { app.Version = readBuildInfo().Version }

// resolveVersion picks this build's version: -X main.version when set
// (not "" or "dev"); else -X ...app.Version when set (not its default);
// else the main module's version that Go stamped (go install
// .../cmd/jetgate@v1.2.3, or a pseudo-version v0.0.0-<time>-<commit> when
// built in a git checkout); else app.DefaultVersion. It gives the same
// answer when called again with its own answer as appVersion, as after
// init.
func resolveVersion(mainVersion, appVersion, moduleVersion string) string {
	switch {
	case mainVersion != "" && mainVersion != "dev":
		return mainVersion
	case appVersion != app.DefaultVersion:
		return appVersion
	case moduleVersion != "" && moduleVersion != "(devel)":
		return moduleVersion
	}
	return app.DefaultVersion
}

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
	b := buildInfo{Version: resolveVersion(version, app.Version, ""), Commit: cmp.Or(commit, "unknown"),
		GoVersion: runtime.Version(), NATSServer: server.VERSION}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return b
	}
	b.Version = resolveVersion(version, app.Version, info.Main.Version)
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
