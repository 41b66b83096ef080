package jsonscan

import (
	"bytes"
	"encoding/json"
	"io"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

// checkSeeds are the inputs of issue 31 (text that is not UTF-8 and keys
// given twice, at any depth) and their neighbours that must pass.
var checkSeeds = []string{
	`{"type":"a","args":["ok"],"meta":{"k":"é"}}`,
	"{\"type\":\"a\",\"args\":[\"\xff\"]}",
	"{\"type\":\"a\",\"args\":[],\"meta\":{\"note\":\"caf\xe9\"}}",
	"{\"a\\u00e9\":1,\"\xc3\":2}",
	`{"args":["\ud800"]}`, `{"args":["\udc00x"]}`, `{"args":["\ud800\u0041"]}`, `{"args":["\ud83d\ude00"]}`,
	`{"args":["\uD83D\uDE00","\ufffd","` + "\uFFFD" + `"]}`,
	`{"type":"a","type":"b"}`, `{"options":{"queue":"a","queue":"b"}}`, `{"a":1,"\u0061":2}`,
	`{"args":[{"x":1,"y":2,"x":3}]}`, `{"a":{"b":[[{"c":1}],{"c":1,"c":1}]}}`,
	`{"a":{"x":1},"b":{"x":1}}`, `{"":1,"":2}`, `{"a":1,"b":{"a":1}}`,
	"\"\xed\xa0\x80\"", `[{"a":1},{"a":1}]`, `1`, `null`, ` {} `,
}

// TestCheck: Check finds what encoding/json would silently change (issue
// 31), names it by its path, and passes everything else; the seeds are
// compared with a reference built on encoding/json's tokenizer, and so
// are random bodies.
func TestCheck(t *testing.T) {
	for in, want := range map[string]*Problem{
		`{"type":"a","args":["ok"],"meta":{"k":"é"}}`:                        nil,
		"{\"type\":\"a\",\"args\":[\"ok\",\"\xff\"]}":                        {Path: "args[1]"},
		"{\"type\":\"a\",\"args\":[],\"meta\":{\"note\":\"caf\xe9\"}}":       {Path: "meta.note"},
		"{\"meta\":{\"\xc3\":2}}":                                            {Path: "meta", InKey: true},
		`{"args":["\ud800"]}`:                                                {Path: "args[0]"},
		`{"args":["\udc00x"]}`:                                               {Path: "args[0]"},
		`{"args":["\ud800\u0041"]}`:                                          {Path: "args[0]"},
		`{"args":["\ud83d\ude00"]}`:                                          nil,
		`{"type":"a","type":"b"}`:                                            {Path: "type", Duplicate: true},
		`{"options":{"queue":"a","queue":"b"}}`:                              {Path: "options.queue", Duplicate: true},
		`{"a":1,"\u0061":2}`:                                                 {Path: "a", Duplicate: true},
		`{"args":[{"x":1,"y":2,"x":3}]}`:                                     {Path: "args[0].x", Duplicate: true},
		`{"a":{"b":[[{"c":1}],{"c":1,"c":1}]}}`:                              {Path: "a.b[1].c", Duplicate: true},
		`{"a":{"x":1},"b":{"x":1},"c":[{"x":1},{"x":1}]}`:                    nil,
		`{"jobs":[{"type":"a"},{"type":"a","args":[],"meta":{},"args":[]}]}`: {Path: "jobs[1].args", Duplicate: true},
		`1`: nil, `"x"`: nil, ` {} `: nil, `[]`: nil,
	} {
		got := Check([]byte(in))
		if (got == nil) != (want == nil) || got != nil && *got != *want {
			t.Errorf("Check(%q) = %+v, want %+v", in, got, want)
		}
	}
	// Past manyKeys keys, repeats are found through the map.
	var sb strings.Builder
	sb.WriteString("{")
	for i := range 3 * manyKeys {
		sb.WriteString(`"k` + strconv.Itoa(i) + `":1,`)
	}
	sb.WriteString(`"k\u0030":2}`)
	if got := Check([]byte(sb.String())); got == nil || *got != (Problem{Path: "k0", Duplicate: true}) {
		t.Errorf("many keys: %+v", got)
	}

	inputs := append([]string(nil), checkSeeds...)
	r := rand.New(rand.NewPCG(3, 4))
	for range 20_000 {
		inputs = append(inputs, randomCheckBody(r))
	}
	found := 0
	for _, in := range inputs {
		if compareCheck(t, []byte(in)) {
			found++
		}
		for i := range min(len(in), 64) { // every cut of the text: no panic
			_ = Check([]byte(in[:i]))
		}
	}
	if found < len(inputs)/10 || found > len(inputs)*9/10 {
		t.Errorf("%d of %d inputs have a problem: the comparison hardly covers one side", found, len(inputs))
	}
}

// FuzzCheck is TestCheck's comparison on arbitrary bytes.
func FuzzCheck(f *testing.F) {
	for _, s := range checkSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) { _ = compareCheck(t, b) })
}

// compareCheck compares Check with referenceCheck on b when b is valid JSON
// (else only runs it: it must not panic on any bytes) and reports whether
// a problem was found.
func compareCheck(t *testing.T, b []byte) bool {
	t.Helper()
	if !json.Valid(b) {
		_ = Check(b) // must not panic on text that is not JSON
		return false
	}
	want, sure := referenceCheck(b)
	got := Check(b)
	if !sure {
		return got != nil
	}
	if (got == nil) != (want == nil) || got != nil && *got != *want {
		t.Fatalf("Check(%q) = %+v, reference %+v", b, got, want)
	}
	return got != nil
}

// referenceCheck finds the first problem of b, valid JSON, with
// encoding/json's tokenizer: a string token whose raw bytes are not UTF-8,
// or which decodes to U+FFFD without spelling it (a surrogate half), or a
// key seen before in its object. sure is false when b spells U+FFFD
// itself, so that a replacement cannot be told from it.
func referenceCheck(b []byte) (p *Problem, sure bool) {
	if bytes.Contains(b, []byte("\uFFFD")) || bytes.Contains(bytes.ToLower(b), []byte(`\ufffd`)) {
		return nil, false
	}
	type frame struct {
		object bool
		keys   map[string]bool
		key    string // the current member's key
		index  int    // the current element's index
		atKey  bool   // an object's next token is a key
	}
	var stack []*frame
	path := func(withTop bool) string {
		var sb strings.Builder
		n := len(stack)
		if !withTop {
			n--
		}
		for _, f := range stack[:n] {
			if !f.object {
				sb.WriteString("[" + strconv.Itoa(f.index) + "]")
				continue
			}
			if sb.Len() > 0 {
				sb.WriteByte('.')
			}
			sb.WriteString(f.key)
		}
		return sb.String()
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	var prev int64
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return nil, true
		}
		raw := bytes.TrimLeft(b[prev:dec.InputOffset()], " \t\r\n,:")
		prev = dec.InputOffset()
		top := (*frame)(nil)
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		isKey := top != nil && top.object && top.atKey
		if d, ok := tok.(json.Delim); ok {
			switch d {
			case '{', '[':
				stack = append(stack, &frame{object: d == '{', keys: map[string]bool{}, atKey: d == '{', index: -1})
				if d == '[' {
					stack[len(stack)-1].index = 0
				}
				continue
			default:
				stack = stack[:len(stack)-1]
			}
		} else if s, ok := tok.(string); ok {
			bad := !utf8.Valid(raw) || strings.ContainsRune(s, utf8.RuneError)
			if isKey {
				if bad {
					return &Problem{Path: path(false), InKey: true}, true
				}
				top.key = s
				if top.keys[s] {
					return &Problem{Path: path(true), Duplicate: true}, true
				}
				top.keys[s] = true
				top.atKey = false
				continue
			}
			if bad {
				return &Problem{Path: path(true)}, true
			}
		}
		// A value ended: the parent moves to its next member.
		if len(stack) > 0 {
			if f := stack[len(stack)-1]; f.object {
				f.atKey = true
			} else {
				f.index++
			}
		}
	}
}

// randomCheckBody is a random JSON object with repeated keys and strings
// that are not text sprinkled in at any depth.
func randomCheckBody(r *rand.Rand) string {
	keys := []string{"a", "b", "type", `\u0061`, "é", "\xff", "k"}
	strs := []string{`"x"`, `"é"`, `"\ud83d\ude00"`, `"\ud800"`, "\"\xff\"", "\"\xed\xa0\x80\"", `"a\"b"`, `""`}
	var value func(depth int) string
	value = func(depth int) string {
		switch n := r.IntN(6); {
		case n < 2 || depth == 0:
			return strs[r.IntN(len(strs))]
		case n == 2:
			return []string{"1", "true", "null", "-2.5e3"}[r.IntN(4)]
		case n == 3:
			var parts []string
			for range r.IntN(4) {
				parts = append(parts, value(depth-1))
			}
			return "[" + strings.Join(parts, ",") + "]"
		}
		var parts []string
		for range r.IntN(4) {
			parts = append(parts, `"`+keys[r.IntN(len(keys))]+`" : `+value(depth-1))
		}
		return "{" + strings.Join(parts, " , ") + "}"
	}
	for {
		if s := value(4); strings.HasPrefix(s, "{") {
			return s
		}
	}
}

// BenchmarkCheck: the cost Check adds to every request body, on an SDK
// enqueue (the body of BenchmarkParseJob/go_sdk) and on a job with 64 KiB
// of args.
func BenchmarkCheck(b *testing.B) {
	big := `{"type":"a","args":[` + strings.Repeat(`{"name":"caf\u00e9 ü","n":12345,"tags":["x","y"]},`, 1200) + `1]}`
	for _, bm := range []struct{ name, body string }{
		{"go_sdk", `{"type":"email.send","args":["user@example.com",{"locale":"en"}],"meta":{"trace_id":"abc"},
		  "options":{"queue":"email","priority":1,"timeout_ms":30000,"delay_until":"2026-03-01T11:00:00+02:00",
		  "retry":{"max_attempts":5,"initial_interval_ms":1000,"backoff_coefficient":2,"max_interval_ms":300000,
		  "jitter":true,"non_retryable_errors":["validation.*"]},"unique":{"key":"k","period_ms":60000,"on_conflict":"reject"},
		  "tags":["onboarding","email"],"visibility_timeout_ms":45000}}`},
		{"args_64k", big},
	} {
		body := []byte(bm.body)
		b.Run(bm.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(body)))
			for range b.N {
				if p := Check(body); p != nil {
					b.Fatal(p)
				}
			}
		})
	}
}
