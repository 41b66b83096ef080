// Package embedded runs the nats-server with JetStream that `jetgate serve`
// starts when no --nats-url is given.
//
// It owns one thing: the lifecycle of that server. Start creates the data
// dir, takes an exclusive lock on it (two servers writing one store dir
// corrupt it), stores JetStream files under it, listens on Config.Addr,
// forwards the server's log lines to slog and returns once clients can
// connect. Shutdown stops it gracefully and releases the lock. It may
// require credentials of every client: a token, or (Config.NKeySeedFile)
// proof of an nkey user seed kept in a file of mode 0600, which Start
// creates at first use when asked (nkey.go).
//
// It never creates streams, buckets or consumers (package topology does),
// never handles signals (the server runs with NoSigs; cmd/jetgate owns
// signals), and never calls os.Exit: nats-server's Fatalf lines become
// errors returned by Start.
package embedded
