package unique_test

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/jetgate/jetgate/admission/ojs"
	"github.com/jetgate/jetgate/admission/unique"
)

func job(typ, queue, args, uniq string) *ojs.Job {
	j := &ojs.Job{Type: typ, Queue: queue, Args: json.RawMessage(args)}
	if uniq != "" {
		j.Unique = json.RawMessage(uniq)
	}
	return j
}

func mustParse(t *testing.T, j *ojs.Job) *unique.Policy {
	t.Helper()
	p, err := unique.Parse(j, "unique.")
	if err != nil {
		t.Fatalf("parse %s: %v", j.Unique, err)
	}
	return p
}

// ojs-unique-jobs.md 2.2 and 6.2: an invalid policy is refused at enqueue
// with invalid_request naming the field (L4-UNIQ-001's policy checks).
func TestPolicyValidation_UNIQ2_2(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args, uniq, field string
	}{
		{`[]`, `{"keys":["type","argz"]}`, "unique.keys[1]"},
		{`[]`, `{"keys":["Type"]}`, "unique.keys[0]"}, // case-sensitive
		{`[]`, `{"keys":["meta"]}`, "unique.meta_keys"},
		{`[{"a":1}]`, `{"keys":["args"],"args_keys":["b"]}`, "unique.args_keys[0]"},
		{`[]`, `{"states":["running"]}`, "unique.states[0]"},
		{`[]`, `{"states":[]}`, "unique.states"},
		{`[]`, `{"on_conflict":"overwrite"}`, "unique.on_conflict"},
		{`[]`, `{"period":"1 hour"}`, "unique.period"},
		{`[]`, `{"period_ms":0}`, "unique.period_ms"},
		{`[]`, `{"period_ms":"5"}`, "unique.period_ms"},
		{`[]`, `{"period":"PT1H","period_ms":5}`, "unique.period_ms"},
		{`[]`, `{"key":""}`, "unique.key"},
		{`[]`, `{"key":"k","keys":["args"]}`, "unique.keys"},
		{`[]`, `{"upgrade_priority":"yes"}`, "unique.upgrade_priority"},
		{`[]`, `{"kee":"x"}`, "unique.kee"},
	} {
		_, err := unique.Parse(job("t", "q", c.args, c.uniq), "unique.")
		var ve *ojs.ValidationError
		if !errors.As(err, &ve) {
			t.Errorf("%s: err %v, want a validation error", c.uniq, err)
			continue
		}
		if ve.Field != c.field {
			t.Errorf("%s: field %q, want %q (%v)", c.uniq, ve.Field, c.field, err)
		}
	}
}

// What the official SDKs send (spec/README.md): key, period_ms,
// on_conflict; and the spec's defaults (6.1 states, 5 reject).
func TestPolicySDKShapeAndDefaults(t *testing.T) {
	t.Parallel()
	p := mustParse(t, job("t", "q", `[]`, `{"key":"order-1","period_ms":1500,"on_conflict":"ignore"}`))
	if p.Period != 1500*time.Millisecond || p.OnConflict != unique.OnConflictIgnore || p.Name != "order-1" {
		t.Fatalf("policy %+v", p)
	}
	p = mustParse(t, job("t", "q", `[]`, `{}`))
	if p.OnConflict != unique.OnConflictReject || len(p.States) != 5 || p.Period != 0 || p.UpgradePriority {
		t.Fatalf("defaults %+v", p)
	}
	for _, st := range []ojs.State{ojs.StateAvailable, ojs.StateActive, ojs.StateScheduled, ojs.StateRetryable, ojs.StatePending} {
		if !p.Counts(st) {
			t.Errorf("default states omit %s", st)
		}
	}
	if p := mustParse(t, job("t", "q", `[]`, `{"period":"PT2M"}`)); p.Period != 2*time.Minute {
		t.Fatalf("period PT2M read as %s", p.Period)
	}
}

// ojs-unique-jobs.md 3 and 4: the key is computed from type (always),
// and the listed dimensions; object keys are sorted (4.2), args_keys
// select (3.3), queue scopes (3.2). Without keys or key, jetgate uses
// type, queue and args (issue 18).
func TestKeyComputation_UNIQ4(t *testing.T) {
	t.Parallel()
	key := func(typ, queue, args, uniq string) string {
		return mustParse(t, job(typ, queue, args, uniq)).Key
	}
	if a, b := key("t", "q", `[{"a":1,"b":[1,2]}]`, `{}`), key("t", "q", `[{"b":[1,2],"a":1}]`, `{}`); a != b {
		t.Error("object key order changed the key")
	}
	if a, b := key("t", "q", `[1.0]`, `{}`), key("t", "q", `[1]`, `{}`); a != b {
		t.Error("1.0 and 1 hash apart (RFC 8785 numbers)")
	}
	if a, b := key("t", "q", `[1]`, `{}`), key("t", "q", `[2]`, `{}`); a == b {
		t.Error("default key ignores args")
	}
	if a, b := key("t", "q1", `[1]`, `{}`), key("t", "q2", `[1]`, `{}`); a == b {
		t.Error("default key ignores queue")
	}
	if a, b := key("t1", "q", `[1]`, `{"keys":["args"]}`), key("t2", "q", `[1]`, `{"keys":["args"]}`); a == b {
		t.Error("type left out of the key (2.2: always included)")
	}
	if a, b := key("t", "q1", `[1]`, `{"keys":["type"]}`), key("t", "q2", `[2]`, `{"keys":["type"]}`); a != b {
		t.Error("keys [type] depends on queue or args")
	}
	sel := `{"keys":["type","args"],"args_keys":["user_id"]}`
	if a, b := key("t", "q", `[{"user_id":42,"locale":"en"}]`, sel), key("t", "q", `{"user_id":42,"locale":"fr"}`, sel); a != b {
		t.Error("args_keys did not select user_id only")
	}
	if a, b := key("t", "q", `[{"user_id":42}]`, sel), key("t", "q", `[{"user_id":43}]`, sel); a == b {
		t.Error("args_keys ignored the selected value")
	}
	m := func(meta string) string {
		j := job("t", "q", `[]`, `{"keys":["meta"],"meta_keys":["tenant"]}`)
		j.Meta = json.RawMessage(meta)
		return mustParse(t, j).Key
	}
	if m(`{"tenant":"acme","trace":"1"}`) != m(`{"tenant":"acme","trace":"2"}`) || m(`{"tenant":"acme"}`) == m(`{"tenant":"globex"}`) {
		t.Error("meta_keys did not select tenant only")
	}
	if a, b := key("t", "q1", `[1]`, `{"key":"k"}`), key("t", "q2", `[2]`, `{"key":"k"}`); a != b {
		t.Error("an explicit key depends on queue or args")
	}
	if a, b := key("t1", "q", `[]`, `{"key":"k"}`), key("t2", "q", `[]`, `{"key":"k"}`); a == b {
		t.Error("an explicit key ignores type (2.2)")
	}
	if k := key("t", "q", `[]`, `{}`); len(k) != 64 {
		t.Errorf("key %q is not a hex SHA-256 (4.2)", k)
	}
}
