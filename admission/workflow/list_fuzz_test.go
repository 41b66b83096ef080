package workflow

import (
	"errors"
	"testing"

	"github.com/jetgate/jetgate/admission/ojs"
)

// A cursor of GET /ojs/v1/workflows (issue 32), fed any string, either
// reads as a position that encodes back to itself, or is a validation
// error naming cursor.
func FuzzListCursor(f *testing.F) {
	for _, s := range []string{listCursor{seq: 1, page: 2}.encode(), listCursor{seq: 1 << 40, page: 9}.encode(),
		"", "w:1:1", "dzowOjE", "dzox", "%%%", "dzoxOjA"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := decodeListCursor(s)
		if err != nil {
			var ve *ojs.ValidationError
			if !errors.As(err, &ve) || ve.Field != "cursor" {
				t.Fatalf("%q: %v, want a validation error naming cursor", s, err)
			}
			return
		}
		if c.seq < 1 || c.page < 1 {
			t.Fatalf("%q read as %+v", s, c)
		}
		if back, err := decodeListCursor(c.encode()); err != nil || back != c {
			t.Fatalf("%q: %+v does not round-trip: %+v %v", s, c, back, err)
		}
	})
}
