package ojs

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

// validationError fails t unless err is a *ValidationError naming a field
// (a 400 envelope with details.field, ojs-json-format.md 7).
func validationError(t *testing.T, what string, err error) {
	t.Helper()
	var ve *ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("%s: error is %T, not a ValidationError: %v", what, err, err)
	}
	// An empty Field is the body itself, or a key "" the client sent
	// (quoted as '' in the message).
	if ve.Field == "" && !strings.Contains(ve.Error(), "body") && !strings.Contains(ve.Error(), "''") {
		t.Fatalf("%s: ValidationError names no field: %+v", what, ve)
	}
}

// FuzzParseRateLimitPolicy: any rate_limit object (full form of
// ojs-rate-limiting.md 6.1 or the SDK shorthand) parses or is a
// ValidationError naming a field; a parsed policy has limits in range and
// re-encodes to JSON that parses to the same policy.
func FuzzParseRateLimitPolicy(f *testing.F) {
	for _, s := range []string{
		`{"key":"api","concurrency":5}`,
		`{"key":"api","rate":{"limit":10,"period":"PT1M"},"on_limit":"reschedule"}`,
		`{"key":"api","throttle":{"limit":1,"period":"PT1S"},"on_limit":"drop"}`,
		`{"rate":100,"period":"minute"}`, `{"max_per_second":5}`, `{"key":"a.b","concurrency":0}`,
		`{"key":"$JS.API.>","concurrency":1}`, `{"key":"a b"}`, `{"key":"","concurrency":1}`,
		`{"key":"k","concurrency":1e400}`, `{"key":"k","concurrency":18446744073709551616}`,
		`{"key":"k","rate":{"limit":-1,"period":"PT0S"}}`, `{"key":1}`, `[]`, `null`, `{`, "\xff",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		p, err := ParseRateLimitPolicy(body, "rate_limit.")
		if err != nil {
			validationError(t, "ParseRateLimitPolicy", err)
		} else {
			checkLimits(t, p.Limits())
			if p.Key != "" && !ValidRateKey(p.Key) {
				t.Fatalf("accepted invalid key %q", p.Key)
			}
			if p.Key != "" {
				b, err := json.Marshal(p)
				if err != nil {
					t.Fatal(err)
				}
				q, err := ParseRateLimitPolicy(b, "rate_limit.")
				if err != nil || !reflect.DeepEqual(p, q) {
					t.Fatalf("%s re-encodes to %s which parses to %+v, %v", body, b, q, err)
				}
			}
		}
		l, err := ParseLimits(body, "")
		if err != nil {
			validationError(t, "ParseLimits", err)
			return
		}
		checkLimits(t, l)
	})
}

func checkLimits(t *testing.T, l Limits) {
	t.Helper()
	if l.Concurrency != nil && (*l.Concurrency < 0 || *l.Concurrency > MaxRateLimit) {
		t.Fatalf("concurrency %d out of range", *l.Concurrency)
	}
	for _, w := range []*RateWindow{l.Rate, l.Throttle} {
		if w != nil && (w.Limit < 1 || w.Limit > MaxRateLimit) {
			t.Fatalf("window limit %d out of range", w.Limit)
		}
	}
}

// FuzzParseWorkflow: any POST /ojs/v1/workflows body parses or is a
// ValidationError naming a field; a parsed workflow has a known type and
// at least one step, each a valid job type.
func FuzzParseWorkflow(f *testing.F) {
	for _, s := range []string{
		`{"type":"chain","name":"c","steps":[{"name":"a","type":"a.b","args":[1]},{"type":"c.d","args":[]}]}`,
		`{"type":"group","jobs":[{"type":"a","args":[]},{"type":"b","args":[],"options":{"queue":"q"}}]}`,
		`{"type":"batch","jobs":[{"type":"a","args":[]}],"callbacks":{"on_success":{"type":"done","args":[]}}}`,
		`{"type":"chain","steps":[],"workflow_timeout":"PT1H"}`, `{"type":"dag","steps":[]}`,
		`{"type":"chain","steps":[{"type":"a","args":[],"options":{"queue":"$JS.API.>"}}]}`,
		`{"type":"chain","steps":[{"type":"a","args":[[[[[[[[[[[]]]]]]]]]]]}]}`,
		`{"type":"chain","options":{"priority":1e400},"steps":[{"type":"a","args":[]}]}`, `{}`, `[]`, "\xff",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		w, err := ParseWorkflow(body)
		if err != nil {
			validationError(t, "ParseWorkflow", err)
			return
		}
		switch w.Type {
		case "chain", "group", "batch":
		default:
			t.Fatalf("accepted workflow type %q", w.Type)
		}
		if len(w.Steps) == 0 || w.Timeout < 0 {
			t.Fatalf("accepted %+v", w)
		}
	})
}

// FuzzParseBatch: any POST /ojs/v1/jobs/batch body parses to valid jobs
// or is a ValidationError naming a field; every parsed job re-encodes to
// an envelope ParseJob accepts with the same type, queue and args.
func FuzzParseBatch(f *testing.F) {
	for _, s := range []string{
		`{"jobs":[{"type":"email.send","args":["a@b"],"options":{"queue":"email","priority":5}}]}`,
		`{"jobs":[{"type":"a","args":[]},{"type":"b","args":[{"x":1}],"options":{"rate_limit":{"rate":5,"period":"second"}}}]}`,
		`{"jobs":[]}`, `{"jobs":[{"type":"a","args":[],"options":{"queue":"a b"}}]}`,
		`{"jobs":[{"type":"a","args":[],"options":{"queue":"..","scheduled_at":"+PT5S"}}]}`,
		`{"jobs":{}}`, `[]`, `{"jobs":[1e400]}`, "{\"jobs\":[{\"type\":\"\xff\",\"args\":[]}]}",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		jobs, err := ParseBatch(body)
		if err != nil {
			validationError(t, "ParseBatch", err)
			return
		}
		for _, j := range jobs {
			b, err := json.Marshal(j)
			if err != nil {
				t.Fatal(err)
			}
			k, err := ParseJob(b)
			if err != nil {
				t.Fatalf("job %s re-encodes to %s, refused: %v", body, b, err)
			}
			// Args are compared as encoding/json writes them (compacted, with
			// <, > and & escaped, as the record encoder does): the same JSON
			// may come back spelled differently ("0&0" as "0\u00260").
			ka, _ := json.Marshal(k.Args)
			ja, _ := json.Marshal(j.Args)
			if k.Type != j.Type || k.Queue != j.Queue || !bytes.Equal(ka, ja) {
				t.Fatalf("round trip changed the job: %+v != %+v", k, j)
			}
		}
	})
}

// FuzzTime: a timestamp is read only if it is RFC 3339 with a zone
// (ojs-json-format.md 5); a read timestamp writes back the exact text
// it was read from, and reading that again gives the same instant.
func FuzzTime(f *testing.F) {
	for _, s := range []string{
		`"2026-02-13T10:00:00Z"`, `"2026-02-13T10:00:00.123456789+02:00"`, `"2026-02-13T10:00:00"`,
		`"+PT5S"`, `"9999-12-31T23:59:59Z"`, `"0000-01-01T00:00:00-23:59"`, `""`, `"`, `1`, `null`,
		"\"2026-02-13T10:00:00\xffZ\"",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var v Time
		if err := json.Unmarshal(b, &v); err != nil {
			return
		}
		out, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		var w Time
		if err := json.Unmarshal(out, &w); err != nil || !w.Time.Equal(v.Time) || w.Text() != v.Text() {
			t.Fatalf("%s -> %s -> %v, %v", b, out, w, err)
		}
	})
}

// FuzzAging: a stored aging record (MarshalJSON's shape) reads back to
// the value it was written from.
func FuzzAging(f *testing.F) {
	f.Add([]byte(`{"interval":"PT1M","interval_ms":60000,"step":1,"min_priority":-5}`))
	f.Add([]byte(`{"interval_ms":5,"step":2}`))
	f.Add([]byte(`{"interval":"P1Y"}`))
	f.Add([]byte(`{"interval":"PT0.0000001S"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var a Aging
		if json.Unmarshal(b, &a) != nil {
			return
		}
		out, err := json.Marshal(&a)
		if err != nil {
			t.Fatal(err)
		}
		var c Aging
		if err := json.Unmarshal(out, &c); err != nil || !reflect.DeepEqual(a, c) {
			t.Fatalf("%s -> %s -> %+v, %v (was %+v)", b, out, c, err, a)
		}
	})
}

// FuzzParseTime: scheduled_at and expires_at (ojs-json-format.md 5, and
// the relative "+PT5S" the SDKs' delay options send) parse or are a
// ValidationError naming the field; an accepted time is within years
// 0000-9999, a relative one is the duration after now, and an absolute
// one reads back from its text to the same instant.
func FuzzParseTime(f *testing.F) {
	for _, s := range []string{
		`"+PT5S"`, `"+P1D"`, `"+PT0.5S"`, `"+-PT5S"`, `"+"`, `"+P99999999Y"`, `"2026-03-01T09:00:00Z"`,
		`"+P250Y"`, `"+P1Y2M3DT4H"`, `"+P1.5Y"`, `"+P1.5DT1H"`, `"+PT2562047H47M16S"`, `"2300-01-01T00:00:00Z"`,
		`"2262-04-11T23:47:16.854Z"`, `"2262-04-11T23:47:16.855Z"`, `"2262-04-12T01:47:16.854+02:00"`,
		`"2026-03-01T09:00:00.123+05:30"`, `"2026-03-01T09:00:00"`, `"9999-12-31T23:59:59-01:00"`, `5`, `null`, `"\u00ff"`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		if !json.Valid(raw) {
			return // a cand's raw value comes from a decoded JSON object
		}
		before := time.Now()
		v, ok, err := parseTime(cand{prefix: "options.", key: "scheduled_at", raw: raw}, time.Now())
		if err != nil {
			var ve *ValidationError
			if !errors.As(err, &ve) || ve.Field != "options.scheduled_at" {
				t.Fatalf("%s: error %T %v does not name options.scheduled_at", raw, err, err)
			}
			return
		}
		if !ok || v.Year() < 0 || v.Year() > 9999 || v.After(LatestTime) {
			t.Fatalf("%s: accepted %v (issue 31: at most %s)", raw, v.Time, LatestTimeText)
		}
		var s string
		if json.Unmarshal(raw, &s) != nil {
			t.Fatalf("%s: accepted a non-string", raw)
		}
		if rel, isRel := strings.CutPrefix(s, "+"); isRel {
			// Exact components alone: now + the duration; with calendar
			// ones, never before now.
			d, err := ParseISODuration(rel)
			if err == nil && v.Before(before.Add(d).Truncate(time.Millisecond)) || v.Before(before.Truncate(time.Millisecond)) {
				t.Fatalf("%s: relative time %v is before now + %v (%v)", raw, v.Time, d, err)
			}
			return
		}
		var back Time
		if err := json.Unmarshal([]byte(strconv.Quote(v.Text())), &back); err != nil || !back.Time.Equal(v.Time) {
			t.Fatalf("%s: text %q reads back as %v, %v", raw, v.Text(), back.Time, err)
		}
	})
}
