package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go"

	"github.com/jetgate/jetgate/admission/ojs"
	"github.com/jetgate/jetgate/jetstream/topology"
)

func eventsCommand() command {
	return group("events", "Watches jetgate's lifecycle events as they are published on NATS (ojs.events.<type>).", eventsTailLeaf())
}

// stringList is a repeatable, comma-separated flag.
type stringList []string

func (l *stringList) String() string { return strings.Join(*l, ",") }
func (l *stringList) Set(v string) error {
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			*l = append(*l, s)
		}
	}
	return nil
}

func eventsTailLeaf() *leaf {
	var types, queues, jobTypes stringList
	var count int
	return &leaf{use: "events tail", nargs: 0,
		summary: "Prints events as jetgate publishes them, until interrupted (or --count events): time, type, queue, job and subject; with --json one CloudEvents JSON object per line. Events are not stored unless jetgate runs with --events-stream: tail shows only what is published while it runs.",
		flags: func(fs *flag.FlagSet) {
			fs.Var(&types, "type", "Only these event types: exact (job.completed), a prefix (job.*) or *. Repeatable or comma-separated.")
			fs.Var(&queues, "queue", "Only events of jobs of these queues (data.queue). Repeatable or comma-separated.")
			fs.Var(&jobTypes, "job-type", "Only events of jobs of these types (data.job_type). Repeatable or comma-separated.")
			fs.IntVar(&count, "count", 0, "Stop after this many events (0: run until interrupted).")
		},
		run: func(ctx context.Context, c *cliCtx, _ []string) error {
			q := ojs.EventQuery{Types: types, Queues: queues, JobTypes: jobTypes}
			return c.tail(ctx, q, count)
		}}
}

// eventSubjects narrows the subscription to the subjects the type
// filters can match: job.completed -> ojs.events.job.completed, job.* ->
// ojs.events.job.>; none or * -> everything.
func eventSubjects(types []string) []string {
	var subs []string
	for _, t := range types {
		switch {
		case t == "*":
			return []string{topology.EventSubjects}
		case strings.HasSuffix(t, ".*"):
			subs = append(subs, topology.EventSubject(strings.TrimSuffix(t, ".*"))+".>")
		default:
			subs = append(subs, topology.EventSubject(t))
		}
	}
	if len(subs) == 0 {
		return []string{topology.EventSubjects}
	}
	return subs
}

func (c *cliCtx) tail(ctx context.Context, q ojs.EventQuery, count int) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	msgs := make(chan *nats.Msg, 1024)
	for _, subj := range eventSubjects(q.Types) {
		sub, err := c.nc.ChanSubscribe(subj, msgs)
		if err != nil {
			return fmt.Errorf("subscribe to %s: %w", subj, err)
		}
		defer sub.Unsubscribe() //nolint:errcheck // the connection closes next
	}
	if err := c.nc.FlushTimeout(c.flags.timeout); err != nil {
		return fmt.Errorf("subscribe: %w", err)
	}
	fmt.Fprintf(c.errOut, "listening on %s (Ctrl-C to stop)\n", strings.Join(eventSubjects(q.Types), ", "))
	if !c.json {
		fmt.Fprintf(c.out, "%-24s  %-20s  %-15s  %-20s  %s\n", "TIME", "TYPE", "QUEUE", "JOB_TYPE", "SUBJECT")
	}
	seen := 0
	for {
		select {
		case <-ctx.Done():
			return nil
		case m := <-msgs:
			var ev ojs.Event
			if err := json.Unmarshal(m.Data, &ev); err != nil {
				fmt.Fprintf(c.errOut, "skipping a message on %s that is not an event: %v\n", m.Subject, err)
				continue
			}
			if !q.Match(ev) {
				continue
			}
			if err := c.printEvent(m.Data, ev); err != nil {
				return err
			}
			if seen++; count > 0 && seen >= count {
				return nil
			}
		}
	}
}

func (c *cliCtx) printEvent(raw []byte, ev ojs.Event) error {
	if c.json {
		_, err := fmt.Fprintf(c.out, "%s\n", compact(raw))
		return err
	}
	var d struct {
		Queue   string `json:"queue"`
		JobType string `json:"job_type"`
	}
	_ = json.Unmarshal(ev.Data, &d) // events without job data print blanks
	_, err := fmt.Fprintf(c.out, "%-24s  %-20s  %-15s  %-20s  %s\n", ev.Time.String(), ev.Type, d.Queue, d.JobType, ev.Subject)
	return err
}

func compact(raw []byte) string {
	var v json.RawMessage
	if json.Unmarshal(raw, &v) != nil {
		return string(raw)
	}
	b, _ := json.Marshal(v)
	return string(b)
}
