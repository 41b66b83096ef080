package admission

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/jetgate/jetgate/jetstream/jobstore"
)

// roleLease is a process's claim on a role that one process at a time
// plays for the whole deployment (DESIGN: "no leader unless a feature
// truly needs one, then a KV lease"). The lease is an entry of the bucket
// OJS_LEASES under the role's name, created expecting none (the fence
// between candidates), renewed by compare-and-swap on its revision, and
// lapsing by itself topology.LeaseTTL after the holder's last renewal (the
// bucket's TTL), so a holder that died gives the role up without anyone
// deciding it. A holder that fails to renew (the entry lapsed and another
// process took it, or NATS did not answer) must stop playing the role at
// once; two holders can therefore overlap by at most the time a renewal
// takes to fail, and a role must stay correct through such an overlap.
//
// It is used by one goroutine at a time (its owner's loop).
type roleLease struct {
	kv     jetstream.KeyValue
	role   string
	holder string
	rev    uint64
}

// leaseValue is what `nats kv get OJS_LEASES <role>` shows.
type leaseValue struct {
	Holder string    `json:"holder"`
	Since  time.Time `json:"since"`
}

// acquire takes the role if no one holds it; false when someone does.
func (l *roleLease) acquire(ctx context.Context, now time.Time) (bool, error) {
	b, err := json.Marshal(leaseValue{Holder: l.holder, Since: now.UTC()})
	if err != nil {
		return false, err
	}
	rev, err := l.kv.Create(ctx, l.role, b)
	switch {
	case errors.Is(err, jetstream.ErrKeyExists):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("take lease %s: %w", l.role, jobstore.Unavailable(err))
	}
	l.rev = rev
	return true, nil
}

// renew extends the lease; an error means the role is lost.
func (l *roleLease) renew(ctx context.Context, since time.Time) error {
	b, err := json.Marshal(leaseValue{Holder: l.holder, Since: since.UTC()})
	if err != nil {
		return err
	}
	rev, err := l.kv.Update(ctx, l.role, b, l.rev)
	if err != nil {
		return fmt.Errorf("renew lease %s: %w", l.role, jobstore.Unavailable(err))
	}
	l.rev = rev
	return nil
}

// release gives the role up at once, if this process still holds it, so
// that another process need not wait for the lease to lapse.
func (l *roleLease) release(ctx context.Context) {
	if l.rev == 0 {
		return
	}
	_ = l.kv.Delete(ctx, l.role, jetstream.LastRevision(l.rev))
	l.rev = 0
}

// processName names this process in the leases it holds: host, process
// id and a unique suffix (two Services of one process are two holders).
func processName() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s/%d/%s", host, os.Getpid(), nuid.Next())
}
