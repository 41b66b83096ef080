package httpbind

import (
	"errors"
	"testing"

	"github.com/jetgate/jetgate/admission/ojs"
	"github.com/jetgate/jetgate/admission/ojs/wire"
)

// decodeCron, fed any body, either returns a definition with a name, an
// expression and a type, or a validation error naming a field (13.2). So
// does a PUT's merge of the body over a registered definition (issue 32).
func FuzzDecodeCron(f *testing.F) {
	for _, s := range []string{
		`{"name":"daily","cron":"0 9 * * *","timezone":"America/New_York","type":"t","args":[1]}`,
		`{"name":"h","expression":"@hourly","overlap_policy":"allow","job_template":{"type":"t","args":[]}}`,
		`{"name":"x","cron":"* * * * *","expression":"0 * * * *","type":"t"}`,
		`{"name":"x","cron":"* * * * *","type":"t","job_template":{"type":"u"}}`,
		`{"name":1}`, `{}`, `[]`, `null`, `{"job_template":"no"}`,
		`{"enabled":false}`, `{"enabled":"no"}`, `{"cron":"@daily","enabled":true}`, `{"name":"other"}`,
		`{"expression":"5 4 * * *","job_template":{"type":"u","args":[]}}`, `{"args":[2]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		o, err := parseObject(body)
		if err != nil {
			return
		}
		check := func(what string, cj ojs.CronJob, err error) {
			if err != nil {
				var ve *ojs.ValidationError
				if !errors.As(err, &ve) || ve.Field == "" {
					t.Fatalf("%s %s: error %v is not a validation error naming a field", what, body, err)
				}
				return
			}
			if cj.Name == "" || cj.Cron == "" || cj.Type == "" {
				t.Fatalf("%s %s: accepted %+v without name, cron or type", what, body, cj)
			}
		}
		cj, err := decodeCron(o)
		check("register", cj, err)
		cur := &ojs.CronJob{Name: "daily", Cron: "0 9 * * *", Timezone: "UTC", OverlapPolicy: "skip", Type: "t", Args: []byte(`[1]`)}
		cj, err = wire.MergeCron("daily", cur, o)
		check("put", cj, err)
	})
}
