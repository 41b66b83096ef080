package main

import (
	"context"
	"encoding/json"
	"flag"
	"sort"
)

const (
	opQueuesList   = "queues.list"
	opQueuesStats  = "queues.stats"
	opQueuesPause  = "queues.pause"
	opQueuesResume = "queues.resume"
)

func queuesCommand() command {
	return group("queues", "Lists queues, shows their counts, and pauses or resumes them, over jetgate's NATS API.",
		queuesLsLeaf(), queuesStatsLeaf(), queuePauseLeaf("pause", opQueuesPause,
			"Pauses a queue: fetches skip it, enqueues still land, active jobs run on. Idempotent; pausing an unknown queue creates it paused."),
		queuePauseLeaf("resume", opQueuesResume, "Resumes a paused queue. Idempotent."))
}

func queuesLsLeaf() *leaf {
	var limit int
	var cursor string
	return &leaf{use: "queues ls", nargs: 0,
		summary: "Lists the queues by name with their status (active or paused).",
		flags: func(fs *flag.FlagSet) {
			fs.IntVar(&limit, "limit", 200, "Queues per page (at most 200).")
			fs.StringVar(&cursor, "cursor", "", "Continue after a previous page (its next cursor).")
		},
		run: func(ctx context.Context, c *cliCtx, _ []string) error {
			req := map[string]any{"limit": limit}
			if cursor != "" {
				req["cursor"] = cursor
			}
			body, err := c.call(ctx, opQueuesList, req)
			return c.printList(body, err, listing{key: "queues", header: "NAME\tSTATUS\tCREATED\tSINCE\tPRESSURE",
				row: queueRow, more: moreCursor})
		}}
}

// queueRow is one queue's line: SINCE is when it was last paused or resumed.
func queueRow(q map[string]any) []string {
	since := str(q["paused_at"])
	if since == "" {
		since = str(q["resumed_at"])
	}
	bp, _ := q["backpressure"].(map[string]any)
	return []string{str(q["name"]), str(q["status"]), str(q["created_at"]), since, str(bp["pressure"])}
}

func queuesStatsLeaf() *leaf {
	return &leaf{use: "queues stats QUEUE", nargs: 1,
		summary: "Shows a queue's jobs per state, last-hour counts and averages, and its bound and pressure if it has one.",
		run: func(ctx context.Context, c *cliCtx, args []string) error {
			body, err := c.call(ctx, opQueuesStats, map[string]any{"queue": args[0]})
			if err != nil || c.json {
				return c.done(body, err)
			}
			var r struct {
				Queue        string         `json:"queue"`
				Status       string         `json:"status"`
				Stats        map[string]any `json:"stats"`
				Backpressure map[string]any `json:"backpressure"`
			}
			if err := json.Unmarshal(body, &r); err != nil {
				return err
			}
			kv := [][2]string{{"QUEUE", r.Queue}, {"STATUS", r.Status}}
			order := []string{"available", "active", "scheduled", "retryable", "pending", "completed", "cancelled", "discarded",
				"completed_last_hour", "failed_last_hour", "avg_duration_ms", "avg_wait_ms", "throughput_per_second", "depth", "bound"}
			seen := map[string]bool{}
			for _, k := range order {
				if v, ok := r.Stats[k]; ok {
					kv = append(kv, [2]string{k, str(v)})
					seen[k] = true
				}
			}
			rest := []string{}
			for k := range r.Stats {
				if !seen[k] {
					rest = append(rest, k)
				}
			}
			sort.Strings(rest)
			for _, k := range rest {
				kv = append(kv, [2]string{k, str(r.Stats[k])})
			}
			if r.Backpressure != nil {
				kv = append(kv, [2]string{"pressure", str(r.Backpressure["pressure"])}, [2]string{"strategy", str(r.Backpressure["strategy"])})
			}
			return c.fields(kv)
		}}
}

func queuePauseLeaf(verb, op, summary string) *leaf {
	return &leaf{use: "queues " + verb + " QUEUE", nargs: 1, summary: summary,
		run: func(ctx context.Context, c *cliCtx, args []string) error {
			body, err := c.call(ctx, op, map[string]any{"queue": args[0]})
			if err != nil || c.json {
				return c.done(body, err)
			}
			var r map[string]any
			if err := json.Unmarshal(body, &r); err != nil {
				return err
			}
			at := str(r["paused_at"])
			if at == "" {
				at = str(r["resumed_at"])
			}
			return c.table("QUEUE\tSTATUS\tPAUSED\tAT", [][]string{{str(r["queue"]), str(r["status"]), str(r["paused"]), at}})
		}}
}
