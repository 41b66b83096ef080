package jsonscan

import (
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// scanSeeds are bodies the scanners must read as encoding/json does, or
// leave to it: the worker requests, and the corners (escapes, non-ASCII,
// repeated keys, nesting, whitespace, invalid JSON).
var scanSeeds = []string{
	`{"job_id":"019414d4-8b2e-7c3a-b5d1-f0e2a3b4c5d6","result":{"ok":true}}`,
	`{"queues":["email","default"],"count":1,"worker_id":"w1"}`,
	`{"queues":[{"name":"a","weight":3},"b"],"weights":{"a":2}}`,
	`{"job_id":"x","error":{"code":"c","message":"m","retryable":true,"details":{"a":[1,2,{"b":"}"}]}}}`,
	"{ \"job_id\" :\t\"x\" ,\n\"attempt\" : 2 \r}",
	` {} `, `{}`, `[]`, `null`, `"x"`, `1`, ``, ` `, `{`, `{"a"}`, `{"a":}`, `{"a":1,}`, `{"a":1}x`, `{"a":1} {}`,
	`{"a":1,"a":2}`, `{"a":null,"a":"x"}`, `{"a":"x","a":null}`,
	`{"job\u005fid":"x"}`, `{"job_id":"\u0078"}`, `{"job_id":"a\"b"}`, `{"job_id":"a\\"}`, `{"é":1}`, `{"job_id":"é"}`,
	"{\"job_id\":\"\xff\"}", "{\"\xff\":1}", `{"job_id":"\ud800"}`, `{"a":"\/"}`,
	`{"a":[],"b":[""],"c":["",""],"d":["x",1],"e":[ "x" , "y" ],"f":["x"],"g":["a\\b"]}`,
	`{"a":-0,"b":1e5,"c":1.5,"d":-12,"e":true,"f":false,"g":null,"h":9223372036854775808}`,
	`{"a":{"b":{"c":{"d":[[[]]]}}},"e":"]}"}`, `{"a":"{\"b\":1}"}`,
	`{"result":"<b>&</b>","job_id":"\u2028"}`,
}

// TestScanMatchesEncodingJSON: on every input the scanners accept, they
// read what encoding/json reads; on the worker requests they do accept.
func TestScanMatchesEncodingJSON(t *testing.T) {
	inputs := append([]string(nil), scanSeeds...)
	r := rand.New(rand.NewPCG(1, 2))
	for range 20_000 {
		inputs = append(inputs, randomBody(r))
	}
	scanned := 0
	for _, in := range inputs {
		if checkScan(t, []byte(in)) {
			scanned++
		}
	}
	if scanned < len(inputs)/4 {
		t.Errorf("only %d of %d inputs scanned: the comparison hardly covers the scanner", scanned, len(inputs))
	}
	for _, in := range scanSeeds[:3] {
		if _, ok := Object([]byte(in)); !ok {
			t.Errorf("%s: not scanned", in)
		}
	}
	if list, ok := PlainStrings([]byte(`["email","default"]`)); !ok || len(list) != 2 {
		t.Errorf("plainStrings: %q %v", list, ok)
	}
}

// FuzzScanObject is TestScanMatchesEncodingJSON on arbitrary bytes.
func FuzzScanObject(f *testing.F) {
	for _, s := range scanSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) { _ = checkScan(t, b) })
}

// checkScan compares scanObject, plainString and plainStrings with
// encoding/json on b and on each member of b, and reports whether
// scanObject read b.
func checkScan(t *testing.T, b []byte) bool {
	t.Helper()
	var want map[string]json.RawMessage
	wantErr := json.Unmarshal(b, &want)
	got, ok := Object(b)
	if ok && (wantErr != nil || want == nil || !reflect.DeepEqual(got, want)) {
		t.Fatalf("%q: scanned %q, encoding/json %q %v", b, got, want, wantErr)
	}
	if ok {
		// Each value is bytes of its own: writes through it reach
		// neither b nor the other values.
		orig := string(b)
		for k, v := range got {
			if cap(v) != len(v) {
				t.Fatalf("%q: value of %q has room after it", b, k)
			}
			for i := range v {
				v[i] = '#'
			}
		}
		if string(b) != orig {
			t.Fatalf("%q: writing to the values changed the body", orig)
		}
	}
	values := [][]byte{b}
	for _, v := range want {
		values = append(values, v)
		var items []json.RawMessage
		if json.Unmarshal(v, &items) == nil {
			for _, it := range items {
				values = append(values, it)
			}
		}
	}
	for _, v := range values {
		if s, ok := PlainString(v); ok {
			var w string
			if err := json.Unmarshal(v, &w); err != nil || s != w {
				t.Fatalf("%q: plainString %q, encoding/json %q %v", v, s, w, err)
			}
		}
		if list, ok := PlainStrings(v); ok {
			w, err := stringArrayJSON(v)
			if err != nil || !reflect.DeepEqual(list, w) {
				t.Fatalf("%q: plainStrings %q, encoding/json %q %v", v, list, w, err)
			}
		}
	}
	return ok
}

// stringArrayJSON is wire.StringArray without its fast path.
func stringArrayJSON(raw []byte) ([]string, error) {
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, err
	}
	list := make([]string, 0, len(items))
	for _, item := range items {
		var s string
		if err := json.Unmarshal(item, &s); err != nil || s == "" {
			return nil, strconv.ErrSyntax
		}
		list = append(list, s)
	}
	return list, nil
}

// randomBody is a JSON Object of the worker requests' fields and others,
// with random spacing, escapes and values; one in four is then damaged.
func randomBody(r *rand.Rand) string {
	var b strings.Builder
	sp := func() {
		for r.IntN(4) == 0 {
			b.WriteByte(" \t\n\r"[r.IntN(4)])
		}
	}
	keys := []string{"job_id", "worker_id", "result", "attempt", "queues", "count", "a", `job\u005fid`, "é", ""}
	sp()
	b.WriteByte('{')
	for i := range r.IntN(5) {
		if i > 0 {
			sp()
			b.WriteByte(',')
		}
		sp()
		b.WriteString(`"` + keys[r.IntN(len(keys))] + `"`)
		sp()
		b.WriteByte(':')
		sp()
		b.WriteString(randomValue(r, 2))
		sp()
	}
	b.WriteByte('}')
	sp()
	s := b.String()
	if r.IntN(4) == 0 && len(s) > 0 {
		i := r.IntN(len(s))
		switch r.IntN(3) {
		case 0:
			s = s[:i]
		case 1:
			s = s[:i] + string("{}[]\",:\\x \x00\xff"[r.IntN(12)]) + s[i:]
		default:
			s = s[:i] + s[i+1:]
		}
	}
	return s
}

func randomValue(r *rand.Rand, depth int) string {
	strs := []string{`""`, `"x"`, `"email"`, `"a\"b"`, `"\u0041"`, `"é"`, `"a b"`, `"<&>"`, `"\\"`, `"}"`, `"]"`}
	switch n := r.IntN(9); {
	case n < 3:
		return strs[r.IntN(len(strs))]
	case n == 3:
		return []string{"0", "-1", "12", "1.5", "1e3", "99999999999999999999"}[r.IntN(6)]
	case n == 4:
		return []string{"true", "false", "null"}[r.IntN(3)]
	case n < 7 && depth > 0:
		var parts []string
		for range r.IntN(4) {
			parts = append(parts, randomValue(r, depth-1))
		}
		return "[" + strings.Join(parts, []string{",", " , ", ",\n"}[r.IntN(3)]) + "]"
	case depth > 0:
		var parts []string
		for range r.IntN(3) {
			parts = append(parts, strs[r.IntN(len(strs))]+":"+randomValue(r, depth-1))
		}
		return "{" + strings.Join(parts, ",") + "}"
	}
	return `"q"`
}
