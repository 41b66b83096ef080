// Package jetgatetest runs a whole jetgate in-process for the tests of
// programs that use it: an embedded nats-server with JetStream (store in a
// temporary directory, a free loopback port) and a jetgate server
// (cmd/jetgate/app, the same assembly `jetgate serve` runs) with its HTTP
// API on another free port. Start returns once both serve and registers
// their shutdown with t.Cleanup.
//
//	func TestSignup(t *testing.T) {
//		jg := jetgatetest.Start(t)
//		// point the code under test at jg.NatsURL (or jg.HTTPURL) ...
//		job := jg.WaitJobState(t, id, "completed", 5*time.Second)
//	}
//
// The Server handle carries the NATS and HTTP URLs, a *nats.Conn and
// JetStream context on the embedded server, jetgate clients over the NATS
// binding (Client) and the HTTP binding (HTTPClient), and the app itself.
// Options: WithConfig (any server setting), WithToken (access control on,
// the clients send the token), WithLogger. With access control on, the
// embedded server requires its nkey seed of NATS clients, as `jetgate
// serve` does: connect other clients with the handle's NatsAuth option
// (or NatsSeedFile).
//
// It imports cmd/jetgate/app, which is an ordinary (not internal)
// package: the kit runs exactly the server the binary runs, with every
// feature on, instead of a second assembly that could drift from it.
//
// The helpers talk to the in-process admission service (the one the HTTP
// and NATS bindings adapt), so they work whichever binding the code under
// test uses and add no traffic a test might count. They poll with a
// deadline and never sleep blindly.
//
// What it must never do: keep anything past the test (every goroutine,
// connection, listener and directory is released by t.Cleanup), or touch
// JetStream state except through jetgate's own API.
package jetgatetest
