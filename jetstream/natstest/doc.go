// Package natstest starts embedded nats-server instances with JetStream for
// tests: one node (RunServer, RunServerOpts), a restart of a node on the same
// store dir and port (Kill, RestartServer), and an in-process 3-node cluster
// (RunCluster). Every server listens on 127.0.0.1 on a random port, stores its
// data under t.TempDir(), and is shut down by t.Cleanup.
//
// Servers are started synchronously (Start, then ReadyForConnections), which
// takes about a millisecond; RunCluster returns only once a JetStream meta
// leader exists and every peer is current, so R3 streams and buckets can be
// created right away.
//
// Set JETGATE_TEST_NATS_LOG=1 to print the servers' logs to stderr.
//
// This package is imported only by tests. It must never be imported by
// production code, and it never calls os.Exit or panics: failures go through
// t.Fatalf.
package natstest
