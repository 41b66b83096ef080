package natstest

import (
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Connect connects to s and returns the connection and a JetStream context.
// The connection is closed when the test ends. It reconnects forever, every
// 25 ms, so it survives RestartServer; opts override these defaults.
func Connect(t testing.TB, s *server.Server, opts ...nats.Option) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	return ConnectURL(t, s.ClientURL(), opts...)
}

// ConnectURL is Connect for a URL or a comma-separated list of URLs, such as
// Cluster.URLs.
func ConnectURL(t testing.TB, url string, opts ...nats.Option) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	all := append([]nats.Option{
		nats.Name(t.Name()),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(25 * time.Millisecond),
		nats.ReconnectJitter(0, 0),
	}, opts...)
	nc, err := nats.Connect(url, all...)
	if err != nil {
		t.Fatalf("natstest: connect %s: %v", url, err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatalf("natstest: jetstream context: %v", err)
	}
	return nc, js
}

// WaitStatus waits until nc reaches status want, such as nats.RECONNECTING
// after Kill or nats.CONNECTED after RestartServer.
//
// A request sent after Kill but before the client noticed the server was
// gone is written to a dead socket and lost (it then times out), so restart
// tests wait for nats.RECONNECTING before restarting, and for
// nats.CONNECTED before sending requests they expect answers to.
func WaitStatus(t testing.TB, nc *nats.Conn, want nats.Status) {
	t.Helper()
	deadline := time.Now().Add(readyTimeout)
	for nc.Status() != want {
		if time.Now().After(deadline) {
			t.Fatalf("natstest: connection is %s after %s, want %s", nc.Status(), readyTimeout, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
