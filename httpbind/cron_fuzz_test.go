package httpbind

import (
	"errors"
	"testing"

	"github.com/jetgate/jetgate/admission/ojs"
)

// decodeCron, fed any body, either returns a definition with a name, an
// expression and a type, or a validation error naming a field (13.2).
func FuzzDecodeCron(f *testing.F) {
	for _, s := range []string{
		`{"name":"daily","cron":"0 9 * * *","timezone":"America/New_York","type":"t","args":[1]}`,
		`{"name":"h","expression":"@hourly","overlap_policy":"allow","job_template":{"type":"t","args":[]}}`,
		`{"name":"x","cron":"* * * * *","expression":"0 * * * *","type":"t"}`,
		`{"name":"x","cron":"* * * * *","type":"t","job_template":{"type":"u"}}`,
		`{"name":1}`, `{}`, `[]`, `null`, `{"job_template":"no"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		o, err := parseObject(body)
		if err != nil {
			return
		}
		cj, err := decodeCron(o)
		if err != nil {
			var ve *ojs.ValidationError
			if !errors.As(err, &ve) || ve.Field == "" {
				t.Fatalf("%s: error %v is not a validation error naming a field", body, err)
			}
			return
		}
		if cj.Name == "" || cj.Cron == "" || cj.Type == "" {
			t.Fatalf("%s: accepted %+v without name, cron or type", body, cj)
		}
	})
}
