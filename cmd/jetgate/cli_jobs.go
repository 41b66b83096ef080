package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// NATS binding operations (NATSBIND.md: <prefix>.<area>.<op>).
const (
	opJobsEnqueue = "jobs.enqueue"
	opJobsGet     = "jobs.get"
	opJobsCancel  = "jobs.cancel"
	opJobsPatch   = "jobs.patch"
	opAdminJobs   = "admin.jobs"
)

func jobsCommand() command {
	return group("jobs", "Reads and changes jobs of a running jetgate over its NATS API.",
		jobsGetLeaf(), jobsCancelLeaf(), jobsPatchLeaf(), jobsLsLeaf())
}

func jobsGetLeaf() *leaf {
	return jobLeaf("get", opJobsGet, "Shows one job: its type, queue, state, priority, attempts, timestamps and last error.")
}

func jobsCancelLeaf() *leaf {
	return jobLeaf("cancel", opJobsCancel, "Cancels a job that has not finished (active jobs too: their worker's ack or nack is then refused).")
}

// jobLeaf is "jobs VERB ID": op on the job ID, printing the job it answers.
func jobLeaf(verb, op, summary string) *leaf {
	return &leaf{use: "jobs " + verb + " ID", nargs: 1, summary: summary,
		run: func(ctx context.Context, c *cliCtx, args []string) error {
			body, err := c.call(ctx, op, map[string]any{"id": args[0]})
			if err != nil {
				return err
			}
			return c.printJob(body)
		}}
}

func jobsPatchLeaf() *leaf {
	var priority int
	var set string
	var patch map[string]any
	return &leaf{use: "jobs patch ID", nargs: 1,
		summary: "Changes an available or scheduled job's priority, or its timeouts (PATCH /ojs/v1/jobs/{id}). Give --priority, --set with a JSON object of fields, or both.",
		flags: func(fs *flag.FlagSet) {
			fs.IntVar(&priority, "priority", -1, "New priority, 0 (runs first) to 999.")
			fs.StringVar(&set, "set", "", "JSON object of PATCH fields, such as '{\"timeout\":60}'.")
		},
		check: func(args []string) error {
			patch = map[string]any{}
			if set != "" {
				if err := json.Unmarshal([]byte(set), &patch); err != nil {
					return fmt.Errorf("--set: not a JSON object: %w", err)
				}
			}
			if priority >= 0 {
				patch["priority"] = priority
			}
			if len(patch) == 0 {
				return fmt.Errorf("jobs patch: nothing to change: give --priority or --set")
			}
			patch["id"] = args[0]
			return nil
		},
		run: func(ctx context.Context, c *cliCtx, _ []string) error {
			body, err := c.call(ctx, opJobsPatch, patch)
			if err != nil || c.json {
				return c.done(body, err)
			}
			var r map[string]any
			if err := json.Unmarshal(body, &r); err != nil {
				return err
			}
			if job, ok := r["job"].(map[string]any); ok {
				return c.fields(jobFields(job))
			}
			return c.fields([][2]string{{"ID", str(r["id"])}, {"PRIORITY", str(r["priority"])}, {"PREVIOUS_PRIORITY", str(r["previous_priority"])}})
		}}
}

// jobsLsLeaf lists jobs with the admin API's job listing (ADM-003) over
// the NATS binding (admin.jobs).
func jobsLsLeaf() *leaf {
	var queue, state, typ, cursor string
	var limit int
	return &leaf{use: "jobs ls", nargs: 0,
		summary: "Lists jobs, filtered by queue, state and type, one page at a time (the admin API's job listing, ADM-003).",
		flags: func(fs *flag.FlagSet) {
			fs.StringVar(&queue, "queue", "", "Only jobs of this queue.")
			fs.StringVar(&state, "state", "", "Only jobs in this state (available, active, scheduled, retryable, pending, completed, cancelled, discarded).")
			fs.StringVar(&typ, "type", "", "Only jobs of this type, or of a type prefix ending in *.")
			fs.IntVar(&limit, "limit", 20, "Jobs per page (at most 100).")
			fs.StringVar(&cursor, "cursor", "", "Continue after a previous page (its next cursor).")
		},
		run: func(ctx context.Context, c *cliCtx, _ []string) error {
			req := map[string]any{"per_page": limit}
			for k, v := range map[string]string{"queue": queue, "state": state, "type": typ, "cursor": cursor} {
				if v != "" {
					req[k] = v
				}
			}
			body, err := c.call(ctx, opAdminJobs, req)
			return c.printList(body, err, listing{key: "items", header: "ID\tTYPE\tQUEUE\tSTATE\tPRIORITY\tATTEMPT\tCREATED",
				row: func(j map[string]any) []string {
					return []string{str(j["id"]), str(j["type"]), str(j["queue"]), str(j["state"]),
						str(j["priority"]), str(j["attempt"]) + "/" + str(j["max_attempts"]), str(j["created_at"])}
				}, more: moreCursor})
		}}
}

func enqueueCommand() command {
	var queue, file, meta string
	var priority, maxAttempts optionalInt
	var job map[string]any
	return single(&leaf{use: "enqueue TYPE [ARGS]", nargs: -1,
		summary: "Enqueues a job of TYPE with ARGS (a JSON array, default []); or, with --file, the whole job envelope from a file (- for stdin), exactly as POST /ojs/v1/jobs takes it.",
		flags: func(fs *flag.FlagSet) {
			fs.StringVar(&queue, "queue", "", "Queue (default: the server's, \"default\").")
			fs.Var(&priority, "priority", "Priority `N`, 0 (runs first) to 999 (default: the server's, 2).")
			fs.Var(&maxAttempts, "max-attempts", "Total attempts `N` before the job is discarded; 0: it runs once and its first failure is final (default: the server's, 3).")
			fs.StringVar(&meta, "meta", "", "JSON object of job meta.")
			fs.StringVar(&file, "file", "", "Read the job envelope (JSON) from this file, - for stdin; TYPE and ARGS are then not given.")
		},
		check: func(args []string) (err error) {
			job, err = jobEnvelope(args, file, queue, meta, priority.n, maxAttempts.n, os.Stdin)
			return err
		},
		run: func(ctx context.Context, c *cliCtx, _ []string) error {
			body, err := c.call(ctx, opJobsEnqueue, job)
			if err != nil {
				return err
			}
			return c.printJob(body)
		}}, dialNATS)
}

// optionalInt is an int flag that knows whether it was given: every value
// written, 0 and negatives too, is sent (the server judges it), and an
// absent flag sends nothing, leaving the server's default.
type optionalInt struct{ n *int }

func (o *optionalInt) Set(s string) error {
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil {
		return fmt.Errorf("want an integer, got %q", s)
	}
	o.n = &n
	return nil
}

func (o *optionalInt) String() string {
	if o == nil || o.n == nil {
		return ""
	}
	return strconv.Itoa(*o.n)
}

// jobEnvelope builds the enqueue body from the arguments and flags; a nil
// priority or maxAttempts was not given and is not sent.
func jobEnvelope(args []string, file, queue, meta string, priority, maxAttempts *int, stdin io.Reader) (map[string]any, error) {
	job := map[string]any{}
	switch {
	case file != "" && len(args) > 0:
		return nil, fmt.Errorf("enqueue: give TYPE [ARGS] or --file, not both")
	case file != "":
		var data []byte
		var err error
		if file == "-" {
			data, err = io.ReadAll(stdin)
		} else {
			data, err = os.ReadFile(file)
		}
		if err != nil {
			return nil, fmt.Errorf("enqueue --file: %w", err)
		}
		if err := json.Unmarshal(data, &job); err != nil {
			return nil, fmt.Errorf("enqueue --file %s: not a JSON object: %w", file, err)
		}
	case len(args) == 0 || len(args) > 2:
		return nil, fmt.Errorf("enqueue takes TYPE and optionally ARGS (a JSON array), got %d arguments", len(args))
	default:
		job["type"] = args[0]
		job["args"] = json.RawMessage("[]")
		if len(args) == 2 {
			if !json.Valid([]byte(args[1])) || !strings.HasPrefix(strings.TrimSpace(args[1]), "[") {
				return nil, fmt.Errorf("enqueue: ARGS must be a JSON array, got %s", args[1])
			}
			job["args"] = json.RawMessage(args[1])
		}
	}
	if err := setOptions(job, queue, priority, maxAttempts); err != nil {
		return nil, err
	}
	if meta != "" {
		if !json.Valid([]byte(meta)) {
			return nil, fmt.Errorf("enqueue --meta: not JSON: %s", meta)
		}
		job["meta"] = json.RawMessage(meta)
	}
	return job, nil
}

// setOptions writes the flags into the job's options, over what a --file
// envelope set: --max-attempts changes only max_attempts of its retry
// policy, keeping the rest.
func setOptions(job map[string]any, queue string, priority, maxAttempts *int) error {
	opts, _ := job["options"].(map[string]any)
	if opts == nil {
		opts = map[string]any{}
	}
	if queue != "" {
		opts["queue"] = queue
	}
	if priority != nil {
		opts["priority"] = *priority
	}
	if maxAttempts != nil {
		retry, ok := opts["retry"].(map[string]any)
		if !ok && opts["retry"] != nil {
			return fmt.Errorf("enqueue --max-attempts: the envelope's options.retry is not an object")
		}
		if retry == nil {
			retry = map[string]any{}
		}
		retry["max_attempts"] = *maxAttempts
		opts["retry"] = retry
	}
	if len(opts) > 0 {
		job["options"] = opts
	}
	return nil
}

// printJob prints a {"job":{...}} reply as fields, or as JSON.
func (c *cliCtx) printJob(body []byte) error {
	if c.json {
		return printJSON(c.out, body)
	}
	var r struct {
		Job map[string]any `json:"job"`
	}
	if err := json.Unmarshal(body, &r); err != nil || r.Job == nil {
		return fmt.Errorf("answer without a job: %s", body)
	}
	return c.fields(jobFields(r.Job))
}

func jobFields(j map[string]any) [][2]string {
	kv := [][2]string{{"ID", str(j["id"])}, {"TYPE", str(j["type"])}, {"QUEUE", str(j["queue"])},
		{"STATE", str(j["state"])}, {"PRIORITY", str(j["priority"])},
		{"ATTEMPT", str(j["attempt"]) + "/" + str(j["max_attempts"])}}
	for _, k := range []string{"args", "previous_state", "created_at", "enqueued_at", "scheduled_at", "started_at", "completed_at", "cancelled_at", "discarded_at", "result"} {
		if v, ok := j[k]; ok && v != nil {
			kv = append(kv, [2]string{strings.ToUpper(k), str(v)})
		}
	}
	if e, ok := j["error"].(map[string]any); ok {
		kv = append(kv, [2]string{"ERROR", strings.TrimSpace(str(e["type"]) + " " + str(e["message"]))})
	}
	return kv
}

// done prints body as JSON when err is nil (the --json path of a leaf).
func (c *cliCtx) done(body []byte, err error) error {
	if err != nil {
		return err
	}
	return printJSON(c.out, body)
}

// str renders a JSON value for a table cell: strings as they are, whole
// numbers without exponent, objects and arrays as compact JSON, null as "".
func str(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	case bool:
		return strconv.FormatBool(x)
	default:
		b, _ := json.Marshal(x)
		return string(b)
	}
}
