package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jetgate/jetgate/admission/ojs"
)

const (
	opLimitsList     = "ratelimits.list"
	opLimitsGet      = "ratelimits.get"
	opLimitsOverride = "ratelimits.override"
)

func limitsCommand() command {
	return group("limits", "Shows rate limit keys (concurrency, window and throttle limits, what is running and waiting) and overrides their limits, over jetgate's NATS API.",
		limitsLsLeaf(), limitsGetLeaf(), limitsSetLeaf())
}

func limitsLsLeaf() *leaf {
	var perPage, page int
	return &leaf{use: "limits ls", nargs: 0,
		summary: "Lists every rate limit, job keys and queue-level limits, by name.",
		flags: func(fs *flag.FlagSet) {
			fs.IntVar(&perPage, "limit", 200, "Keys per page (at most 200).")
			fs.IntVar(&page, "page", 1, "Page number.")
		},
		run: func(ctx context.Context, c *cliCtx, _ []string) error {
			body, err := c.call(ctx, opLimitsList, map[string]any{"per_page": perPage, "page": page})
			return c.printList(body, err, listing{key: "items", header: "KEY\tSCOPE\tCONCURRENCY\tRATE\tTHROTTLE\tWAITING\tOVERRIDE",
				row: limitRow, more: func(p map[string]any) string {
					if p["has_more"] == true {
						return "--page " + strconv.Itoa(page+1)
					}
					return ""
				}})
		}}
}

// limitRow is one key's line: concurrency as active/limit, the window as
// count/limit per period, the throttle as limit per period.
func limitRow(it map[string]any) []string {
	var conc, rate, thr string
	if m, ok := it["concurrency"].(map[string]any); ok {
		conc = str(m["active"]) + "/" + str(m["limit"])
	}
	if m, ok := it["rate"].(map[string]any); ok {
		rate = str(m["current_count"]) + "/" + str(m["limit"]) + " per " + str(m["period"])
	}
	if m, ok := it["throttle"].(map[string]any); ok {
		thr = str(m["limit"]) + " per " + str(m["period"])
	}
	ov := ""
	if m, ok := it["override"].(map[string]any); ok {
		ov = "yes"
		if exp := str(m["expires_at"]); exp != "" {
			ov = "until " + exp
		}
	}
	return []string{str(it["key"]), str(it["scope"]), conc, rate, thr, str(it["waiting_count"]), ov}
}

func limitsGetLeaf() *leaf {
	return &leaf{use: "limits get KEY", nargs: 1,
		summary: "Shows one rate limit key: its limits in force, what runs and waits, the stored policy and any override or hold.",
		run: func(ctx context.Context, c *cliCtx, args []string) error {
			body, err := c.call(ctx, opLimitsGet, map[string]any{"key": args[0]})
			if err != nil {
				return err
			}
			return c.printLimit(body)
		}}
}

func (c *cliCtx) printLimit(body []byte) error {
	if c.json {
		return printJSON(c.out, body)
	}
	var it map[string]any
	if err := json.Unmarshal(body, &it); err != nil {
		return err
	}
	row := limitRow(it)
	kv := [][2]string{{"KEY", row[0]}, {"SCOPE", row[1]}, {"CONCURRENCY", row[2]}, {"RATE", row[3]},
		{"THROTTLE", row[4]}, {"WAITING", row[5]}, {"OVERRIDE", row[6]}, {"STARTS_TOTAL", str(it["starts_total"])},
		{"POLICY", str(it["policy"])}}
	if u := str(it["rate_limit_until"]); u != "" {
		kv = append(kv, [2]string{"HELD_UNTIL", u + " " + str(it["rate_limit_until_reason"])})
	}
	return c.fields(kv)
}

func limitsSetLeaf() *leaf {
	var concurrency int
	var rate, throttle string
	var expiresIn time.Duration
	var req map[string]any
	return &leaf{use: "limits set KEY", nargs: 1,
		summary: "Overrides a key's limits for every job of the key (RL-R004) until --expires-in passes or it is replaced or reset. Give at least one of --concurrency, --rate, --throttle.",
		flags: func(fs *flag.FlagSet) {
			fs.IntVar(&concurrency, "concurrency", -1, "Most jobs of the key running at once; 0 pauses the key.")
			fs.StringVar(&rate, "rate", "", "Window: N/PERIOD starts, such as 100/1m or 100/PT1M.")
			fs.StringVar(&throttle, "throttle", "", "Throttle: N/PERIOD evenly spaced starts, such as 10/1s.")
			fs.DurationVar(&expiresIn, "expires-in", 0, "The override ends after this long (default: it stays).")
		},
		check: func(args []string) (err error) {
			req, err = overrideBody(args[0], concurrency, rate, throttle, expiresIn, time.Now())
			return err
		},
		run: func(ctx context.Context, c *cliCtx, _ []string) error {
			body, err := c.call(ctx, opLimitsOverride, req)
			if err != nil {
				return err
			}
			return c.printLimit(body)
		}}
}

// overrideBody builds the PUT /ojs/v1/rate-limits/{key} body with the key.
func overrideBody(key string, concurrency int, rate, throttle string, expiresIn time.Duration, now time.Time) (map[string]any, error) {
	req := map[string]any{"key": key}
	if concurrency >= 0 {
		req["concurrency"] = concurrency
	}
	for name, v := range map[string]string{"rate": rate, "throttle": throttle} {
		if v == "" {
			continue
		}
		w, err := parseWindow(v)
		if err != nil {
			return nil, fmt.Errorf("--%s: %w", name, err)
		}
		req[name] = w
	}
	if len(req) == 1 {
		return nil, fmt.Errorf("limits set: nothing to set: give --concurrency, --rate or --throttle")
	}
	if expiresIn > 0 {
		req["expires_at"] = now.Add(expiresIn).UTC().Format(time.RFC3339)
	}
	return req, nil
}

// parseWindow reads N/PERIOD, PERIOD a Go duration (1m) or ISO 8601 (PT1M).
func parseWindow(s string) (map[string]any, error) {
	n, p, ok := strings.Cut(s, "/")
	limit, err := strconv.Atoi(n)
	if !ok || err != nil || limit < 0 {
		return nil, fmt.Errorf("want N/PERIOD such as 100/1m, got %q", s)
	}
	period := p
	if d, err := time.ParseDuration(p); err == nil {
		period = ojs.FormatISODuration(d)
	} else if _, err := ojs.ParseISODuration(p); err != nil {
		return nil, fmt.Errorf("period %q is neither a duration (1m) nor ISO 8601 (PT1M)", p)
	}
	return map[string]any{"limit": limit, "period": period}, nil
}
