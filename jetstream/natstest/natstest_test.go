package natstest_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetgate/jetgate/jetstream/natstest"
)

// testContext bounds a test. A 3-node cluster on a loaded 2-core machine
// took more than 10 s to create an R3 bucket once (in a full -race run
// beside benchmarks), so the bound is generous: it catches a hang, not
// slowness.
func testContext(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestRunServer(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	s := natstest.RunServer(t)
	_, js := natstest.Connect(t, s)

	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "TEST"})
	if err != nil {
		t.Fatalf("create bucket: %v", err)
	}
	if _, err := kv.Put(ctx, "a.b", []byte("hello")); err != nil {
		t.Fatalf("put: %v", err)
	}
	e, err := kv.Get(ctx, "a.b")
	if err != nil {
		t.Fatalf("get: %v", err)
	}
	if got := string(e.Value()); got != "hello" {
		t.Fatalf("get = %q, want hello", got)
	}
}

func TestRunServerOpts(t *testing.T) {
	t.Parallel()
	s := natstest.RunServerOpts(t, func(o *server.Options) {
		o.JetStreamMaxMemory = 64 << 20
	})
	if got := s.JetStreamConfig().MaxMemory; got != 64<<20 {
		t.Fatalf("max memory = %d, want %d", got, 64<<20)
	}
}

func TestRestartServer(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	s := natstest.RunServer(t)
	nc, js := natstest.Connect(t, s)
	url, dir := s.ClientURL(), s.StoreDir()

	st, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "S", Subjects: []string{"s.>"}})
	if err != nil {
		t.Fatalf("create stream: %v", err)
	}
	if _, err := js.Publish(ctx, "s.1", []byte("kept")); err != nil {
		t.Fatalf("publish: %v", err)
	}

	natstest.Kill(s)
	if s.Running() {
		t.Fatal("server still running after Kill")
	}
	natstest.WaitStatus(t, nc, nats.RECONNECTING)
	s2 := natstest.RestartServer(t, s)
	if s2.ClientURL() != url || s2.StoreDir() != dir {
		t.Fatalf("restarted at %s %s, want %s %s", s2.ClientURL(), s2.StoreDir(), url, dir)
	}

	// The same connection reconnects on its own.
	natstest.WaitStatus(t, nc, nats.CONNECTED)
	msg, err := st.GetLastMsgForSubject(ctx, "s.1")
	if err != nil {
		t.Fatalf("get after restart: %v", err)
	}
	if string(msg.Data) != "kept" {
		t.Fatalf("data after restart = %q, want kept", msg.Data)
	}
}

func TestRunCluster(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	c := natstest.RunCluster(t, 3)
	if c.Leader() == nil {
		t.Fatal("no meta leader after RunCluster")
	}
	for i, s := range c.Servers {
		if want := "n" + string(rune('1'+i)); s.Name() != want {
			t.Fatalf("server %d named %q, want %q", i, s.Name(), want)
		}
	}
	_, js := c.Connect(t)

	st, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "R3", Subjects: []string{"r3.>"}, Replicas: 3})
	if err != nil {
		t.Fatalf("create R3 stream: %v", err)
	}
	ack, err := js.Publish(ctx, "r3.x", []byte("x"))
	if err != nil {
		t.Fatalf("publish: %v", err)
	}
	if ack.Sequence != 1 {
		t.Fatalf("ack sequence = %d, want 1", ack.Sequence)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatalf("stream info: %v", err)
	}
	if info.Cluster == nil || len(info.Cluster.Replicas) != 2 {
		t.Fatalf("stream cluster info = %+v, want a leader and 2 replicas", info.Cluster)
	}

	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "R3KV", Replicas: 3})
	if err != nil {
		t.Fatalf("create R3 bucket: %v", err)
	}
	if _, err := kv.Create(ctx, "k", []byte("v")); err != nil {
		t.Fatalf("kv create: %v", err)
	}
}

func TestClusterRestartNode(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	c := natstest.RunCluster(t, 3)
	// Connect to a node that stays up, so no request is lost in the restart.
	_, js := natstest.ConnectURL(t, c.Servers[1].ClientURL())
	st, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "R3", Subjects: []string{"r3.>"}, Replicas: 3})
	if err != nil {
		t.Fatalf("create R3 stream: %v", err)
	}
	if _, err := js.Publish(ctx, "r3.x", []byte("x")); err != nil {
		t.Fatalf("publish: %v", err)
	}

	c.Restart(t, 0)

	if _, err := js.Publish(ctx, "r3.y", []byte("y")); err != nil {
		t.Fatalf("publish after restart: %v", err)
	}
	msg, err := st.GetLastMsgForSubject(ctx, "r3.x")
	if err != nil || string(msg.Data) != "x" {
		t.Fatalf("get after restart = %v, %v", msg, err)
	}
}
