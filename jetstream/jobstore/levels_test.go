package jobstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	"github.com/jetgate/jetgate/jetstream/jobstore"
	"github.com/jetgate/jetgate/jetstream/natstest"
	"github.com/jetgate/jetgate/jetstream/topology"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// setupStore runs a server with jetgate's streams and buckets.
var setupStore = jobstore.SetupStore

// setupClusterStore is setupStore on a 3-node cluster with R3 streams.
func setupClusterStore(t *testing.T) (context.Context, *nats.Conn, jetstream.JetStream, *topology.Assets) {
	t.Helper()
	cl := natstest.RunCluster(t, 3)
	nc, js := cl.Connect(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	assets, err := topology.Ensure(ctx, js, topology.Config{Replicas: 3})
	if err != nil {
		t.Fatal(err)
	}
	return ctx, nc, js, assets
}
