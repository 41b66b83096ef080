package natstest

import (
	"fmt"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// ClusterName is the name of every cluster RunCluster starts.
const ClusterName = "jetgate-test"

// clusterReadyTimeout bounds the wait for a meta leader with all peers.
const clusterReadyTimeout = 30 * time.Second

// Cluster is an in-process JetStream cluster on loopback.
type Cluster struct {
	// Servers are the nodes, named n1..nN. Restart replaces entries.
	Servers []*server.Server
}

// RunCluster starts an n-node JetStream cluster (use 3) on 127.0.0.1, each
// node with its own store dir and random client port, and returns once a
// meta leader exists and every node is current. All nodes are shut down when
// the test ends.
//
// Route ports are picked up front (listen on :0, close) because every node's
// routes must name every node, itself included: nats-server sizes the initial
// meta group from the number of configured routes.
func RunCluster(t testing.TB, n int) *Cluster {
	t.Helper()
	if n < 1 {
		t.Fatalf("natstest: cluster of %d nodes", n)
	}
	ports := freePorts(t, n)
	routes := make([]*url.URL, n)
	for i, p := range ports {
		routes[i] = &url.URL{Scheme: "nats-route", Host: net.JoinHostPort("127.0.0.1", fmt.Sprint(p))}
	}
	c := &Cluster{}
	for i := range n {
		opts := DefaultOptions(t)
		opts.ServerName = fmt.Sprintf("n%d", i+1)
		opts.Cluster.Name = ClusterName
		opts.Cluster.Host = "127.0.0.1"
		opts.Cluster.Port = ports[i]
		opts.Routes = routes
		c.Servers = append(c.Servers, StartServer(t, opts))
	}
	c.WaitReady(t)
	return c
}

// URLs returns the client URLs of all nodes, comma-separated, for nats.Connect.
func (c *Cluster) URLs() string {
	urls := make([]string, len(c.Servers))
	for i, s := range c.Servers {
		urls[i] = s.ClientURL()
	}
	return strings.Join(urls, ",")
}

// Connect connects to any node of the cluster; see ConnectURL.
func (c *Cluster) Connect(t testing.TB, opts ...nats.Option) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	return ConnectURL(t, c.URLs(), opts...)
}

// Leader returns the current JetStream meta leader among the running nodes,
// or nil if there is none.
func (c *Cluster) Leader() *server.Server {
	for _, s := range c.Servers {
		if s.Running() && s.JetStreamIsLeader() {
			return s
		}
	}
	return nil
}

// Restart stops node i (if running) and starts it again on the same ports and
// store dir, then waits until the cluster is ready again.
func (c *Cluster) Restart(t testing.TB, i int) *server.Server {
	t.Helper()
	c.Servers[i] = RestartServer(t, c.Servers[i])
	c.WaitReady(t)
	return c.Servers[i]
}

// WaitReady waits until a meta leader sees every running node as an online
// peer and every running node is current with the meta group. Use it after
// Kill-ing a node to wait for a new meta leader among the others.
func (c *Cluster) WaitReady(t testing.TB) {
	t.Helper()
	deadline := time.Now().Add(clusterReadyTimeout)
	for {
		if c.ready() {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("natstest: cluster not ready after %s", clusterReadyTimeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (c *Cluster) ready() bool {
	leader := c.Leader()
	if leader == nil {
		return false
	}
	running := 0
	for _, s := range c.Servers {
		if !s.Running() {
			continue
		}
		if !s.JetStreamIsCurrent() {
			return false
		}
		running++
	}
	return len(leader.JetStreamClusterPeers()) == running
}

// freePorts returns n distinct loopback ports that were free a moment ago.
// All listeners are held open together so the ports differ.
func freePorts(t testing.TB, n int) []int {
	t.Helper()
	ports := make([]int, n)
	for i := range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("natstest: pick free port: %v", err)
		}
		defer l.Close()
		ports[i] = l.Addr().(*net.TCPAddr).Port
	}
	return ports
}
