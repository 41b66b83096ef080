package wire

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/jetgate/jetgate/admission/ojs"
)

// ackReplyByReflection is AckReply without its encoder: what
// encoding/json writes for the struct (ojs-http-binding.md 10.2's body).
type ackReplyByReflection struct {
	Acknowledged bool `json:"acknowledged"`
	*ojs.AckResult
}

// The ACK's body is the same bytes encoding/json writes for the struct,
// whatever the strings hold and whether the time was read or made.
func TestAckReplyMatchesEncodingJSON(t *testing.T) {
	var read ojs.Time // keeps the text it was read from
	if err := json.Unmarshal([]byte(`"2026-11-27T21:30:00.123+01:00"`), &read); err != nil {
		t.Fatal(err)
	}
	for _, r := range []AckReply{
		NewAckReply(&ojs.AckResult{ID: "019ac", JobID: "019ac", State: ojs.StateCompleted,
			CompletedAt: ojs.NewTime(time.Date(2026, 11, 27, 21, 30, 0, 123e6, time.UTC))}),
		NewAckReply(&ojs.AckResult{ID: "a<b>&\"\\\u2028", JobID: "\x01é\xff", State: "x", CompletedAt: &read}),
		NewAckReply(&ojs.AckResult{}),
		NewAckReply(nil),
		{},
	} {
		want, err := json.Marshal(ackReplyByReflection(r))
		if err != nil {
			t.Fatal(err)
		}
		if got := r.AppendJSON(nil); string(got) != string(want) {
			t.Errorf("AppendJSON = %s\nwant          %s", got, want)
		}
		if got, _ := json.Marshal(r); string(got) != string(want) {
			t.Errorf("json.Marshal = %s\nwant           %s", got, want)
		}
	}
}

func FuzzAckReply(f *testing.F) {
	f.Add("id", "job", "completed", int64(0), true)
	f.Fuzz(func(t *testing.T, id, jobID, state string, ms int64, withTime bool) {
		res := &ojs.AckResult{ID: id, JobID: jobID, State: ojs.State(state)}
		if withTime {
			res.CompletedAt = ojs.NewTime(time.UnixMilli(ms % (1 << 40)).UTC())
		}
		r := NewAckReply(res)
		want, err := json.Marshal(ackReplyByReflection(r))
		if err != nil {
			t.Skip()
		}
		if got := r.AppendJSON(nil); string(got) != string(want) {
			t.Errorf("AppendJSON = %s\nwant          %s", got, want)
		}
	})
}
