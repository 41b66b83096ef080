package unique

import (
	"errors"
	"regexp"
	"testing"

	"github.com/jetgate/jetgate/admission/ojs"
)

var hexKey = regexp.MustCompile(`^[0-9a-f]{64}$`)

// FuzzParse: any "unique" object of an enqueue either gives a policy or a
// ValidationError naming a field under "unique." (ojs-unique-jobs.md 2,
// 6); a policy's key is a SHA-256 hex digest (so no name a producer sends
// reaches a KV key unescaped), the same for the same job, its period is
// not negative, and its states and on_conflict are known values.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		`{"key":"order-42","period_ms":60000,"on_conflict":"reject"}`, // SDK shape (spec/README.md)
		`{"keys":["type","queue","args"],"period":"PT1H","states":["available","active"]}`,
		`{"args_keys":["id"],"meta_keys":["tenant"],"on_conflict":"replace_except_schedule","upgrade_priority":true}`,
		`{"key":"$JS.API.>"}`, `{"key":"a b.*"}`, `{"key":""}`, `{"period_ms":-1}`, `{"period_ms":1e400}`,
		`{"period":"P100000000Y"}`, `{"states":["completed","nope"]}`, `{"on_conflict":"merge"}`, `[]`, `"x"`, `{}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, uniq []byte) {
		j := &ojs.Job{Type: "a.b", Queue: "default", Args: []byte(`[1]`), Unique: uniq}
		p, err := Parse(j, "unique.")
		if err != nil {
			var ve *ojs.ValidationError
			if !errors.As(err, &ve) || len(ve.Field) < len("unique") || ve.Field[:6] != "unique" {
				t.Fatalf("%s: error %T %v does not name a unique field", uniq, err, err)
			}
			return
		}
		if p == nil {
			if len(uniq) != 0 && string(uniq) != "null" {
				t.Fatalf("%s: no policy and no error", uniq)
			}
			return
		}
		if !hexKey.MatchString(p.Key) || p.Name == "" || p.Period < 0 || len(p.States) == 0 {
			t.Fatalf("%s: policy %+v", uniq, p)
		}
		switch p.OnConflict {
		case OnConflictReject, OnConflictReplace, OnConflictReplaceExceptSchedule, OnConflictIgnore:
		default:
			t.Fatalf("%s: on_conflict %q", uniq, p.OnConflict)
		}
		q, err := Parse(j, "unique.")
		if err != nil || q.Key != p.Key {
			t.Fatalf("%s: key not stable: %v %v", uniq, q, err)
		}
	})
}
