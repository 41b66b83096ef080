package natsbind

import (
	"encoding/json"
	"testing"

	"github.com/jetgate/jetgate/admission/ojs/wire"
)

// The body fields that stand for HTTP's query parameters: any body either
// becomes query values or is refused with a 4xx naming what is wrong,
// never a panic or a 5xx; the field that named the resource is removed
// and nothing else is.
func FuzzBodyFields(f *testing.F) {
	for _, s := range []string{`{"limit":5,"types":["a","b"],"since":"2026-01-01T00:00:00Z"}`, `{"queue":{}}`,
		`{"types":[1,true,null]}`, `[]`, ``, `{"a":[[1]]}`, `{"id":"x","priority":1}`, `nul`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := queryValues(&call{data: b})
		if err != nil {
			if e := wire.Classify(err); e.Status >= 500 {
				t.Fatalf("%q: %v answers %d", b, err, e.Status)
			}
			return
		}
		o, _ := wire.ParseObject(b)
		for k := range v {
			if _, ok := o[k]; !ok {
				t.Fatalf("%q: query value %s not in the body", b, k)
			}
		}
		rest, err := withoutField(&call{data: b}, "id")
		if err != nil {
			t.Fatalf("%q: %v after the body parsed", b, err)
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(rest, &m); err != nil || m["id"] != nil || len(m) != len(o)-btoi(o["id"] != nil) {
			t.Fatalf("%q: without id = %s", b, rest)
		}
	})
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
