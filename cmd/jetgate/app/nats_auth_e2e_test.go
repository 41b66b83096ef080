package app_test

import (
	"crypto/tls"
	"os"
	"path/filepath"
	"testing"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nkeys"

	"github.com/jetgate/jetgate/cmd/jetgate/app"
	"github.com/jetgate/jetgate/jetstream/natstest"
)

// TestExternalNATSCredentials (issue 20: for --nats-url, NKeys,
// user/password, token and TLS): against a NATS server requiring each
// kind of credential, jetgate connects with the matching config and runs a
// worker session; without credentials it does not start.
func TestExternalNATSCredentials(t *testing.T) {
	t.Parallel()
	kp, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := kp.PublicKey()
	seed, _ := kp.Seed()
	seedFile := filepath.Join(t.TempDir(), "user.nk")
	if err := os.WriteFile(seedFile, seed, 0o600); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	writeCert(t, certFile, keyFile, 7)

	for name, c := range map[string]struct {
		server func(*server.Options)
		cfg    app.Config
	}{
		"user/password": {func(o *server.Options) { o.Username, o.Password = "jg", "pw" },
			app.Config{NatsUser: "jg", NatsPassword: "pw"}},
		"token": {func(o *server.Options) { o.Authorization = "tok" }, app.Config{NatsToken: "tok"}},
		"nkey": {func(o *server.Options) { o.Nkeys = []*server.NkeyUser{{Nkey: pub}} },
			app.Config{NatsNKey: seedFile}},
		"tls": {func(o *server.Options) {
			cert, err := tls.LoadX509KeyPair(certFile, keyFile)
			if err != nil {
				t.Fatal(err)
			}
			o.TLSConfig = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
			o.TLS = true
		}, app.Config{NatsTLSCA: certFile}},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ns := natstest.RunServerOpts(t, c.server)
			url := ns.ClientURL()
			if name == "tls" {
				url = "tls://" + ns.Addr().String()
			}
			if _, err := app.Start(t.Context(), app.Config{NatsURL: url, HTTPAddr: "127.0.0.1:0"}, nil); err == nil {
				t.Fatal("jetgate started without the server's credentials")
			}
			cfg := c.cfg
			cfg.NatsURL = url
			s := startApp(t, cfg)
			exerciseSession(t, client{t: t, base: s.URL()})
		})
	}
}
