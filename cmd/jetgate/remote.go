package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/jetgate/jetgate/cmd/jetgate/app"
)

// The NATS binding's micro error headers (NATSBIND.md): the HTTP status
// and the OJS error code; the body is the OJS error envelope.
const (
	hdrErrorStatus = "Nats-Service-Error-Code"
	hdrErrorCode   = "Nats-Service-Error"
)

// remoteFlags are the flags of every command that talks to a running
// jetgate over NATS. Each also reads JETGATE_<FLAG>.
type remoteFlags struct {
	natsURL, natsCreds, natsToken string
	natsNKey, natsUser, natsPass  string
	token, prefix                 string
	timeout                       time.Duration
	json                          bool
}

// remoteFlagNames lists the common flags in the order the help shows them.
var remoteFlagNames = [][2]string{
	{"nats-url", "URLS"}, {"nats-nkey", "FILE"}, {"nats-creds", "FILE"}, {"nats-user", "USER"}, {"nats-password", "PASSWORD"},
	{"nats-token", "TOKEN"}, {"token", "TOKEN"},
	{"nats-api-prefix", "PREFIX"}, {"timeout", "DURATION"}, {"json", ""},
}

func (rf *remoteFlags) define(fs *flag.FlagSet) {
	fs.StringVar(&rf.natsURL, "nats-url", nats.DefaultURL, "Comma-separated URLs of the NATS server(s) jetgate uses (for jetgate serve with its embedded server: its --nats-addr).")
	fs.StringVar(&rf.natsNKey, "nats-nkey", "", "File holding the nkey seed to connect with: for jetgate serve's embedded server with bearer tokens configured, <data-dir>/nats-user.nk (or its --nats-nkey).")
	fs.StringVar(&rf.natsCreds, "nats-creds", "", "NATS credentials file (JWT and nkey seed) to connect with.")
	fs.StringVar(&rf.natsUser, "nats-user", "", "NATS user name to connect with (with --nats-password).")
	fs.StringVar(&rf.natsPass, "nats-password", "", "NATS password. Prefer the environment variable.")
	fs.StringVar(&rf.natsToken, "nats-token", "", "NATS authentication token to connect with (jetgate serve --nats-auth-token). Prefer the environment variable.")
	fs.StringVar(&rf.token, "token", "", "jetgate bearer token, sent as Authorization: Bearer on every request (needed when jetgate has tokens configured). Prefer the environment variable.")
	fs.StringVar(&rf.prefix, "nats-api-prefix", "ojs.v1", "Subject prefix of jetgate's NATS API (the deployment's prefix if it changed it).")
	fs.DurationVar(&rf.timeout, "timeout", 5*time.Second, "How long to wait for each answer.")
	fs.BoolVar(&rf.json, "json", false, "Print the answer as JSON (the OJS body, as the API sends it) instead of a table.")
}

// connect opens a NATS connection with the flags' credentials.
func (rf *remoteFlags) connect() (*nats.Conn, error) {
	opts := []nats.Option{nats.Name("jetgate cli"), nats.Timeout(rf.timeout)}
	if rf.natsNKey != "" {
		o, err := nats.NkeyOptionFromSeed(rf.natsNKey)
		if err != nil {
			return nil, fmt.Errorf("--nats-nkey: %w", err)
		}
		opts = append(opts, o)
	}
	if rf.natsCreds != "" {
		opts = append(opts, nats.UserCredentials(rf.natsCreds))
	}
	if rf.natsUser != "" {
		opts = append(opts, nats.UserInfo(rf.natsUser, rf.natsPass))
	}
	if rf.natsToken != "" {
		opts = append(opts, nats.Token(rf.natsToken))
	}
	nc, err := nats.Connect(rf.natsURL, opts...)
	if errors.Is(err, nats.ErrAuthorization) || err != nil && strings.Contains(strings.ToLower(err.Error()), "authorization violation") {
		return nil, fmt.Errorf("connect to NATS at %s: %w (the server wants credentials: for jetgate serve's embedded server with "+
			"bearer tokens configured, --nats-nkey <data-dir>/%s, or JETGATE_NATS_NKEY; see its startup log)", rf.natsURL, err, app.NatsSeedFileName)
	}
	if err != nil {
		return nil, fmt.Errorf("connect to NATS at %s: %w", rf.natsURL, err)
	}
	return nc, nil
}

// apiError is an OJS error answered by jetgate: main prints it as
// "jetgate: <code>: <message>" and exits non-zero.
type apiError struct {
	Status  string         // the HTTP status the binding maps it to ("404")
	Code    string         `json:"code"`
	Message string         `json:"message"`
	Details map[string]any `json:"details,omitempty"`
}

func (e *apiError) Error() string { return e.Code + ": " + e.Message }

// remote calls jetgate's NATS binding.
type remote struct {
	nc      *nats.Conn
	flags   *remoteFlags
	subject string // of the last call, for messages
}

// call sends body to <prefix>.<op> and returns the success reply body, or
// an *apiError when jetgate answers with an error.
func (r *remote) call(ctx context.Context, op string, body any) (json.RawMessage, error) {
	data, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	subj := r.flags.prefix + "." + op
	msg := nats.NewMsg(subj)
	msg.Data = data
	if r.flags.token != "" {
		msg.Header.Set("Authorization", "Bearer "+r.flags.token)
	}
	ctx, cancel := context.WithTimeout(ctx, r.flags.timeout)
	defer cancel()
	res, err := r.nc.RequestMsgWithContext(ctx, msg)
	if errors.Is(err, nats.ErrNoResponders) {
		return nil, fmt.Errorf("nothing answers on %s: is jetgate running on the NATS at %s with API prefix %q?", subj, r.flags.natsURL, r.flags.prefix)
	}
	if err != nil {
		return nil, fmt.Errorf("request %s: %w", subj, err)
	}
	if status := res.Header.Get(hdrErrorStatus); status != "" {
		return nil, decodeError(status, res.Header.Get(hdrErrorCode), res.Data)
	}
	return res.Data, nil
}

// decodeError reads the OJS error envelope {"error":{code,message,...}}
// of an error reply, falling back to the micro headers.
func decodeError(status, code string, body []byte) *apiError {
	var env struct {
		Error *apiError `json:"error"`
	}
	if json.Unmarshal(body, &env) == nil && env.Error != nil && env.Error.Code != "" {
		env.Error.Status = status
		return env.Error
	}
	return &apiError{Status: status, Code: code, Message: strings.TrimSpace(string(body))}
}

// printJSON prints a reply body indented, for --json.
func printJSON(w io.Writer, body []byte) error {
	var b bytes.Buffer
	if err := json.Indent(&b, body, "", "  "); err != nil {
		return fmt.Errorf("answer is not JSON: %w", err)
	}
	b.WriteByte('\n')
	_, err := w.Write(b.Bytes())
	return err
}

// parseRemote parses a remote command's flags, then sets the connection
// flags not given from their JETGATE_* variables, and
// returns the positional args. A command's own flags (--queue, --type ...)
// have no variable: a stray JETGATE_QUEUE must not filter a listing.
//
// Flags may follow the arguments (jetgate jobs get ID --json): parsing
// resumes after each argument.
func parseRemote(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			break
		}
		if len(args) > len(rest) && args[len(args)-len(rest)-1] == "--" {
			pos = append(pos, rest...) // after --, everything is an argument
			break
		}
		pos, args = append(pos, rest[0]), rest[1:]
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	var errs []error
	fs.VisitAll(func(f *flag.Flag) {
		if given[f.Name] || !isRemoteFlag(f.Name) {
			return
		}
		if v, ok := os.LookupEnv(envName(f.Name)); ok && v != "" {
			if err := f.Value.Set(v); err != nil {
				errs = append(errs, fmt.Errorf("invalid value %q for %s: %v", v, envName(f.Name), err))
			}
		}
	})
	return pos, errors.Join(errs...)
}
