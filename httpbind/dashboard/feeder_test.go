package dashboard_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jetgate/jetgate/admission"
	"github.com/jetgate/jetgate/admission/admin"
	"github.com/jetgate/jetgate/admission/ojs"
	"github.com/jetgate/jetgate/cmd/jetgate/app"
	"github.com/jetgate/jetgate/httpbind/dashboard"
)

// countingBackend is the real backend (a running jetgate's admission
// service and admin API) counting the snapshots read through it.
type countingBackend struct {
	*admission.Service
	*admin.Admin
	lists atomic.Int64
}

func (c *countingBackend) ListQueues(ctx context.Context) ([]ojs.QueueInfo, error) {
	c.lists.Add(1)
	return c.Service.ListQueues(ctx)
}

func (c *countingBackend) Health(ctx context.Context) ojs.Health { return c.Service.Health(ctx) }

// feederSetup serves a dashboard of its own, with a fast Interval, over a
// real listener, reading a real jetgate.
func feederSetup(t *testing.T) (*dashboard.Dashboard, *countingBackend, string) {
	t.Helper()
	s := start(t, app.Config{})
	svc := s.app.Service()
	adm, err := admin.New(svc, svc.Store(), admin.Config{})
	if err != nil {
		t.Fatal(err)
	}
	b := &countingBackend{Service: svc, Admin: adm}
	d, err := dashboard.New(b, dashboard.Config{Interval: 50 * time.Millisecond, EventInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(d)
	t.Cleanup(func() {
		d.Close()
		ts.Close()
	})
	return d, b, ts.URL
}

// The feeder runs only while a stream is open (docs/dashboard.md "How it
// updates"): no page, no reads. Two streams share its snapshots.
func TestFeederRunsOnlyWhileAStreamIsOpen(t *testing.T) {
	t.Parallel()
	_, b, url := feederSetup(t)
	srv := &server{t: t, base: url}
	if n := b.lists.Load(); n != 0 {
		t.Fatalf("%d snapshots read before any stream opened", n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	_, one := srv.openStream(ctx, nil)
	_, two := srv.openStream(ctx, nil)
	for range 5 {
		for _, ch := range []<-chan sseEvent{one, two} {
			select {
			case <-ch:
			case <-ctx.Done():
				t.Fatal("no snapshot on an open stream")
			}
		}
	}
	read := b.lists.Load()
	if read < 4 || read > 8 {
		t.Fatalf("%d snapshots read for 5 on each of two streams: want one read per interval for both", read)
	}
	cancel()
	// Once both are gone the feeder stops: the count settles.
	var last int64 = -1
	eventually(t, 10*time.Second, func() string {
		n := b.lists.Load()
		if n == last {
			time.Sleep(300 * time.Millisecond) // six intervals without a read
			if b.lists.Load() == n {
				return ""
			}
		}
		last = n
		return fmt.Sprintf("still reading: %d snapshots", n)
	})
}

// Close ends open streams at once and refuses new ones (503): the server's
// shutdown does not wait for them.
func TestCloseEndsStreams(t *testing.T) {
	t.Parallel()
	d, _, url := feederSetup(t)
	srv := &server{t: t, base: url}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, evs := srv.openStream(ctx, nil)
	<-evs
	d.Close()
	deadline := time.After(5 * time.Second)
	for open := true; open; {
		select {
		case _, open = <-evs:
		case <-deadline:
			t.Fatal("stream still open 5 s after Close")
		}
	}
	res, err := http.Get(url + "/dashboard/stream")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("stream after Close: %d, want 503", res.StatusCode)
	}
	d.Close() // twice is fine
}
