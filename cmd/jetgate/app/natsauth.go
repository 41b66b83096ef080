package app

import (
	"cmp"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/nats-io/nats.go"

	"github.com/jetgate/jetgate/admission/authz"
	"github.com/jetgate/jetgate/jetstream/embedded"
)

// NatsSeedFileName is the file in the data dir holding the nkey user seed
// the embedded NATS server requires of its clients when bearer tokens are
// configured and no other NATS credential is given (issue 31 item 8).
const NatsSeedFileName = "nats-user.nk"

// embeddedAuth sets how the embedded server authenticates its clients:
//   - --nats-auth-token: every client sends that token;
//   - --nats-nkey FILE: clients prove they hold that nkey user seed;
//   - bearer tokens configured (HTTP and the NATS API are access
//     controlled): the seed in <data-dir>/nats-user.nk, created at first
//     start with mode 0600, so the NATS port is not a way around them;
//   - nothing: any client that reaches the port is served, as before.
func (c Config) embeddedAuth(ec *embedded.Config, keys *authz.Keyring) {
	switch {
	case c.NatsAuthToken != "":
		ec.Token = c.NatsAuthToken
	case c.NatsNKey != "":
		ec.NKeySeedFile = c.NatsNKey
	case keys != nil:
		ec.NKeySeedFile = filepath.Join(c.DataDir, NatsSeedFileName)
		ec.CreateNKeySeed = true
	}
}

// logNatsAuth says how clients of the embedded server at url
// authenticate, and how an operator's nats CLI and jetgate's own CLI do.
func (s *Server) logNatsAuth(url string) {
	switch {
	case s.cfg.NatsAuthToken != "":
		s.log.Info("NATS access control on: the embedded server requires the --nats-auth-token token of every client",
			"nats_cli", fmt.Sprintf("nats --server nats://<token>@%s", hostPort(url)),
			"jetgate_cli", "--nats-token <token> (JETGATE_NATS_TOKEN)")
	case s.seedFile != "":
		seed := s.seedFile
		if abs, err := filepath.Abs(seed); err == nil {
			seed = abs
		}
		s.log.Info("NATS access control on: the embedded server accepts only clients holding the nkey seed in this file",
			"nkey_seed_file", seed,
			"nats_cli", fmt.Sprintf("nats context save jetgate --server %s --nkey %s --select", url, seed),
			"jetgate_cli", "--nats-nkey "+seed+" (JETGATE_NATS_NKEY)")
	default:
		s.log.Warn("NATS access control off: the embedded server serves any client that reaches its port (configure bearer tokens, --nats-nkey or --nats-auth-token)",
			"url", url)
	}
}

// hostPort is url without its scheme.
func hostPort(url string) string {
	_, hp, found := strings.Cut(url, "://")
	if !found {
		return url
	}
	return hp
}

// validateNatsAuth refuses two ways of securing the embedded server.
func (c Config) validateNatsAuth() error {
	if c.NatsURL == "" && c.NatsAuthToken != "" && c.NatsNKey != "" {
		return fmt.Errorf("--nats-auth-token and --nats-nkey both secure the embedded server: give one")
	}
	return nil
}

// authOptions are the options jetgate's own NATS connection authenticates
// with: the embedded server's token or nkey seed, or the --nats-*
// credentials and TLS settings of an external server.
func (s *Server) authOptions() ([]nats.Option, error) {
	var opts []nats.Option
	c := s.cfg
	if c.NatsAuthToken != "" {
		opts = append(opts, nats.Token(c.NatsAuthToken)) // the embedded server's token (validate: no --nats-url)
	}
	if c.NatsCreds != "" {
		opts = append(opts, nats.UserCredentials(c.NatsCreds))
	}
	if seed := cmp.Or(c.NatsNKey, s.seedFile); seed != "" {
		o, err := nats.NkeyOptionFromSeed(seed)
		if err != nil {
			return nil, fmt.Errorf("read nkey seed file %s: %w", seed, err)
		}
		opts = append(opts, o)
	}
	if c.NatsUser != "" {
		opts = append(opts, nats.UserInfo(c.NatsUser, c.NatsPassword))
	}
	if c.NatsToken != "" {
		opts = append(opts, nats.Token(c.NatsToken))
	}
	if c.NatsTLSCert != "" {
		opts = append(opts, nats.ClientCert(c.NatsTLSCert, c.NatsTLSKey))
	}
	if c.NatsTLSCA != "" {
		opts = append(opts, nats.RootCAs(c.NatsTLSCA))
	}
	return opts, nil
}

// NatsAuth is the option that makes a NATS connection authenticate as
// jetgate's own does (see authOptions), for clients in this process: the
// test kit, tests, a program embedding jetgate. Without credentials it
// changes nothing.
func (s *Server) NatsAuth() nats.Option {
	opts := s.auth
	return func(o *nats.Options) error {
		for _, opt := range opts {
			if err := opt(o); err != nil {
				return err
			}
		}
		return nil
	}
}

// NatsSeedFile is the nkey seed file clients of the embedded server
// authenticate with (give it to nats.NkeyOptionFromSeed, the nats CLI's
// --nkey or jetgate's --nats-nkey); "" when it requires no nkey.
func (s *Server) NatsSeedFile() string { return s.seedFile }
