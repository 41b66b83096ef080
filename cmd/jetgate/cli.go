package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// leaf is one command of the remote CLI (jetgate jobs get, jetgate
// enqueue ...): its usage line, what it does, how many arguments it takes,
// its own flags, and its body. Every leaf also has the remoteFlags.
type leaf struct {
	use     string // "jobs get ID"
	summary string
	nargs   int // positional arguments required; -1: any number
	flags   func(fs *flag.FlagSet)
	run     func(ctx context.Context, c *cliCtx, args []string) error
	// check, if set, validates the arguments and flags before any
	// connection is made.
	check func(args []string) error
}

// cliCtx is what a leaf runs with: a connected remote, the output, and
// whether to print JSON.
type cliCtx struct {
	remote
	out    io.Writer
	errOut io.Writer
	json   bool
}

// table writes aligned columns: the header, then rows.
func (c *cliCtx) table(header string, rows [][]string) error {
	tw := tabwriter.NewWriter(c.out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, header)
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	return tw.Flush()
}

// listing says how a list reply prints: its items are under key (items,
// queues), each one a row under header; more reads the reply's pagination
// and returns the flag that asks for the next page, "" on the last.
type listing struct {
	key    string
	header string
	row    func(item map[string]any) []string
	more   func(pagination map[string]any) string
}

// printList prints a list reply (or the call's error) as a table and, when
// there is a next page, "more: FLAG" on stderr; with --json, as JSON.
func (c *cliCtx) printList(body []byte, err error, l listing) error {
	if err != nil || c.json {
		return c.done(body, err)
	}
	var r map[string]json.RawMessage
	if err := json.Unmarshal(body, &r); err != nil {
		return err
	}
	var items []map[string]any
	var pagination map[string]any
	for _, f := range []struct {
		name string
		dst  any
	}{{l.key, &items}, {"pagination", &pagination}} {
		if raw, ok := r[f.name]; ok {
			if err := json.Unmarshal(raw, f.dst); err != nil {
				return err
			}
		}
	}
	rows := make([][]string, 0, len(items))
	for _, it := range items {
		rows = append(rows, l.row(it))
	}
	if err := c.table(l.header, rows); err != nil {
		return err
	}
	if next := l.more(pagination); next != "" {
		fmt.Fprintf(c.errOut, "more: %s\n", next)
	}
	return nil
}

// moreCursor is the next page of a cursor listing: --cursor NEXT.
func moreCursor(p map[string]any) string {
	if next := str(p["next_cursor"]); next != "" && p["has_more"] == true {
		return "--cursor " + next
	}
	return ""
}

// fields writes "NAME  value" lines for one object, in order.
func (c *cliCtx) fields(kv [][2]string) error {
	tw := tabwriter.NewWriter(c.out, 0, 4, 2, ' ', 0)
	for _, f := range kv {
		fmt.Fprintf(tw, "%s\t%s\n", f[0], f[1])
	}
	return tw.Flush()
}

func (l *leaf) usage(fs *flag.FlagSet) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Usage:\n  jetgate %s [flags]\n\n%s", l.use, wrap(l.summary, "", 78))
	own := []string{}
	fs.VisitAll(func(f *flag.Flag) {
		if !isRemoteFlag(f.Name) {
			own = append(own, f.Name)
		}
	})
	if len(own) > 0 {
		b.WriteString("\nFlags:\n")
		for _, n := range own {
			writeFlagHelp(&b, fs.Lookup(n), "")
		}
	}
	b.WriteString("\nConnection (every remote command; each also read from its JETGATE_ variable):\n")
	for _, nf := range remoteFlagNames {
		writeFlagHelp(&b, fs.Lookup(nf[0]), nf[1])
	}
	return b.String()
}

// name is the command without its argument placeholders ("limits set").
func (l *leaf) name() string {
	words := strings.Fields(l.use)
	n := 0
	for n < len(words) && strings.ToLower(words[n]) == words[n] {
		n++
	}
	return strings.Join(words[:n], " ")
}

func isRemoteFlag(name string) bool {
	for _, nf := range remoteFlagNames {
		if nf[0] == name {
			return true
		}
	}
	return false
}

func writeFlagHelp(b *strings.Builder, f *flag.Flag, arg string) {
	name := "--" + f.Name
	quoted, usage := flag.UnquoteUsage(f) // a `word` of the usage names the value
	if arg == "" {
		arg = quoted
		if _, isBool := f.Value.(interface{ IsBoolFlag() bool }); isBool {
			arg = ""
		}
	}
	if arg != "" {
		name += " " + arg
	}
	var note []string
	if isRemoteFlag(f.Name) {
		note = append(note, envName(f.Name))
	}
	switch f.DefValue {
	case "", "false", "0", "-1", "0s":
	default:
		note = append(note, "default "+f.DefValue)
	}
	b.WriteString("  " + name)
	if len(note) > 0 {
		b.WriteString("  (" + strings.Join(note, ", ") + ")")
	}
	b.WriteString("\n")
	b.WriteString(wrap(usage, "      ", 78))
}

// runLeaf parses the flags, connects to NATS and runs the leaf.
func runLeaf(ctx context.Context, l *leaf, args []string, stdout, stderr io.Writer, dial func(*remoteFlags) (*cliCtx, func(), error)) error {
	fs := flag.NewFlagSet(l.use, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var rf remoteFlags
	rf.define(fs)
	if l.flags != nil {
		l.flags(fs)
	}
	pos, err := parseRemote(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(stdout, l.usage(fs))
		return nil
	}
	if err == nil && l.nargs >= 0 && len(pos) != l.nargs {
		err = fmt.Errorf("%s takes %d argument(s), got %d", l.use, l.nargs, len(pos))
	}
	if err == nil && l.check != nil {
		err = l.check(pos)
	}
	if err != nil {
		fmt.Fprintf(stderr, "Usage:\n  jetgate %s [flags]\nRun \"jetgate %s --help\" for its flags.\n", l.use, l.name())
		return err
	}
	c, closeFn, err := dial(&rf)
	if err != nil {
		return err
	}
	defer closeFn()
	c.out, c.errOut, c.json = stdout, stderr, rf.json
	return l.run(ctx, c, pos)
}

// dialNATS connects for a leaf that uses the NATS binding.
func dialNATS(rf *remoteFlags) (*cliCtx, func(), error) {
	nc, err := rf.connect()
	if err != nil {
		return nil, nil, err
	}
	return &cliCtx{remote: remote{nc: nc, flags: rf}}, nc.Close, nil
}

// group is a command with subcommands (jetgate jobs get|cancel|...).
func group(name, intro string, leaves ...*leaf) command {
	var b strings.Builder
	fmt.Fprintf(&b, "Usage:\n  jetgate %s <command> [flags]\n\n%s\nCommands:\n", name, wrap(intro, "", 78))
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	for _, l := range leaves {
		first, _, _ := strings.Cut(l.summary, ".")
		fmt.Fprintf(tw, "  %s\t%s\n", strings.TrimPrefix(l.use, name+" "), first)
	}
	tw.Flush()
	fmt.Fprintf(&b, "\nRun \"jetgate %s <command> --help\" for a command's flags.\n", name)
	usage := b.String()
	return command{usage: usage, run: func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
		if len(args) == 0 {
			fmt.Fprint(stderr, usage)
			return fmt.Errorf("%s: missing command", name)
		}
		if args[0] == "-h" || args[0] == "-help" || args[0] == "--help" || args[0] == "help" {
			fmt.Fprint(stdout, usage)
			return nil
		}
		for _, l := range leaves {
			if sub, _, _ := strings.Cut(strings.TrimPrefix(l.use, name+" "), " "); sub == args[0] {
				return runLeaf(ctx, l, args[1:], stdout, stderr, dialNATS)
			}
		}
		fmt.Fprint(stderr, usage)
		return fmt.Errorf("%s: unknown command %q", name, args[0])
	}}
}

// single is a remote command without subcommands (jetgate enqueue).
func single(l *leaf, dial func(*remoteFlags) (*cliCtx, func(), error)) command {
	fs := flag.NewFlagSet(l.use, flag.ContinueOnError)
	var rf remoteFlags
	rf.define(fs)
	if l.flags != nil {
		l.flags(fs)
	}
	return command{usage: l.usage(fs), run: func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
		return runLeaf(ctx, l, args, stdout, stderr, dial)
	}}
}
