package jobstore

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetgate/jetgate/jetstream/natstest"
	"github.com/jetgate/jetgate/jetstream/topology"
)

// SetupStore runs a server of its own with jetgate's streams and buckets,
// and returns a context bounding the test's calls, the connection and its
// assets: the setup of the internal and the external tests alike.
func SetupStore(t *testing.T) (context.Context, *nats.Conn, jetstream.JetStream, *topology.Assets) {
	t.Helper()
	s := natstest.RunServer(t)
	nc, js := natstest.Connect(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	assets, err := topology.Ensure(ctx, js, topology.Config{})
	if err != nil {
		t.Fatal(err)
	}
	return ctx, nc, js, assets
}
