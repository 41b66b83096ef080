package app_test

import (
	"crypto/tls"
	"os"
	"path/filepath"
	"testing"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nkeys"

	"github.com/jetgate/jetgate/cmd/jetgate/app"
	"github.com/jetgate/jetgate/jetstream/natstest"
)

// TestExternalNATSCredentials (issue 20: for --nats-url, credentials
// files, NKeys, user/password, token and TLS): against a NATS server
// requiring each
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
	operator, credsFile := operatorSetup(t)

	for name, c := range map[string]struct {
		server func(*server.Options)
		cfg    app.Config
	}{
		"user/password": {func(o *server.Options) { o.Username, o.Password = "jg", "pw" },
			app.Config{NatsUser: "jg", NatsPassword: "pw"}},
		"token": {func(o *server.Options) { o.Authorization = "tok" }, app.Config{NatsToken: "tok"}},
		"creds": {operator, app.Config{NatsCreds: credsFile}},
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

// operatorSetup makes a decentralized-auth setup (an operator, an account
// with JetStream, a user) the way nsc would: the server options that trust
// the operator and preload the account, and the user's credentials file
// (JWT and nkey seed), which is what --nats-creds reads.
func operatorSetup(t *testing.T) (func(*server.Options), string) {
	t.Helper()
	okp, _ := nkeys.CreateOperator()
	opub, _ := okp.PublicKey()
	oc := jwt.NewOperatorClaims(opub)
	oc.Name = "jetgate-test"
	sys, _ := nkeys.CreateAccount()
	syspub, _ := sys.PublicKey()
	oc.SystemAccount = syspub
	ojwt, err := oc.Encode(okp)
	must(t, err)

	sc := jwt.NewAccountClaims(syspub)
	sc.Name = "SYS"
	sysjwt, err := sc.Encode(okp)
	must(t, err)

	akp, _ := nkeys.CreateAccount()
	apub, _ := akp.PublicKey()
	ac := jwt.NewAccountClaims(apub)
	ac.Name = "JETGATE"
	ac.Limits.JetStreamLimits = jwt.JetStreamLimits{MemoryStorage: -1, DiskStorage: -1, Streams: -1, Consumer: -1}
	ajwt, err := ac.Encode(okp)
	must(t, err)

	ukp, _ := nkeys.CreateUser()
	upub, _ := ukp.PublicKey()
	uc := jwt.NewUserClaims(upub)
	uc.Name = "jetgate"
	uc.IssuerAccount = ""
	ujwt, err := uc.Encode(akp)
	must(t, err)
	useed, _ := ukp.Seed()
	creds, err := jwt.FormatUserConfig(ujwt, useed)
	must(t, err)
	credsFile := filepath.Join(t.TempDir(), "jetgate.creds")
	must(t, os.WriteFile(credsFile, creds, 0o600))

	op, err := jwt.DecodeOperatorClaims(ojwt)
	must(t, err)
	return func(o *server.Options) {
		o.TrustedOperators = []*jwt.OperatorClaims{op}
		o.SystemAccount = syspub
		res := &server.MemAccResolver{}
		must(t, res.Store(syspub, sysjwt))
		must(t, res.Store(apub, ajwt))
		o.AccountResolver = res
	}, credsFile
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
