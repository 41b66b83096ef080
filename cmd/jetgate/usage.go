package main

import (
	"fmt"
	"strings"

	"github.com/jetgate/jetgate/cmd/jetgate/app"
)

const serveIntro = `Runs the OJS HTTP API. Without --nats-url it also runs an embedded NATS
server with JetStream, storing jobs in --data-dir: one process, nothing
else to install. With --nats-url it connects to your NATS server or
cluster instead, and any number of jetgate processes can share it.

Every flag can also be set by the environment variable shown next to it;
a flag on the command line wins over its variable.`

const serveExamples = `Examples:
  # Embedded NATS, data in ./jetgate-data, OJS API on http://127.0.0.1:8080:
  jetgate serve

  # One of several jetgate processes sharing a 3-node NATS cluster:
  jetgate serve --http-addr 0.0.0.0:8080 --replicas 3 \
    --nats-url nats://n1:4222,nats://n2:4222,nats://n3:4222 \
    --nats-creds /etc/jetgate/jetgate.creds

  # The same settings from the environment, as in a container:
  JETGATE_NATS_URL=nats://nats:4222 JETGATE_LOG_FORMAT=json jetgate serve
`

const serveShortUsage = `Usage:
  jetgate serve [flags]

Run "jetgate serve --help" for every flag, its environment variable and
its default.
`

// serveUsage renders the serve help from the flag definitions, so the
// defaults and ranges shown are the ones used.
func serveUsage() string {
	var cfg app.Config
	fs := newServeFlags(&cfg)
	var b strings.Builder
	fmt.Fprintf(&b, "%s\n\nUsage:\n  jetgate serve [flags]\n\n%s\n", about, serveIntro)
	for _, g := range serveGroups {
		fmt.Fprintf(&b, "\n%s:\n", g.title)
		for _, nf := range g.flags {
			f := fs.Lookup(nf[0])
			name := "--" + f.Name
			if nf[1] != "" {
				name += " " + nf[1] // a boolean flag takes no value
			}
			fmt.Fprintf(&b, "  %s  (%s", name, envName(f.Name))
			if f.DefValue != "" {
				fmt.Fprintf(&b, ", default %s", f.DefValue)
			}
			if r, ok := f.Value.(ranged); ok {
				fmt.Fprintf(&b, ", %s", r.rangeText())
			}
			fmt.Fprintf(&b, ")\n%s", wrap(f.Usage, "      ", 78))
		}
	}
	fmt.Fprintf(&b, "\n%s", serveExamples)
	return b.String()
}

// wrap breaks text into lines of at most width columns, each indented.
func wrap(text, indent string, width int) string {
	var b strings.Builder
	line := indent
	for _, w := range strings.Fields(text) {
		if line != indent && len(line)+1+len(w) > width {
			b.WriteString(line + "\n")
			line = indent
		}
		if line != indent {
			line += " "
		}
		line += w
	}
	b.WriteString(line + "\n")
	return b.String()
}
