package admission

import (
	"errors"
	"testing"

	"github.com/jetgate/jetgate/admission/ojs"
	"github.com/jetgate/jetgate/jetstream/jobstore"
)

// A message published for a transition from revision 7 is early while the
// record reads at 7 (the write has not landed) and also when it reads
// below 7 (a read behind the writes, as after a cluster node restart): it
// must be put back, not acked. Only a record past 7 with another token
// makes it stale. Acking on a lagging read stranded jobs (issue #3).
func TestStaleOrEarlyReadBehindIsEarly(t *testing.T) {
	ref := jobstore.MsgRef{JobID: "j", Token: "t-new", BaseRev: 7}
	for _, c := range []struct {
		rev  uint64
		want error
	}{{5, errEarly}, {6, errEarly}, {7, errEarly}, {8, errStale}, {12, errStale}} {
		j := &ojs.Job{ID: "j", Rev: c.rev, Internal: ojs.Internal{Token: "t-old"}}
		if got := staleOrEarly(j, ref); !errors.Is(got, c.want) {
			t.Errorf("record at rev %d: %v, want %v", c.rev, got, c.want)
		}
	}
	// A message without a base revision cannot be told early.
	if got := staleOrEarly(&ojs.Job{Rev: 3}, jobstore.MsgRef{JobID: "j", Token: "x"}); !errors.Is(got, errStale) {
		t.Errorf("no base revision: %v, want stale", got)
	}
}
