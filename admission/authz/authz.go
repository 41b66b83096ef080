// Package authz is jetgate's access control, shared by every binding: the
// roles, the operation classes each role may perform (the one role table),
// and the Keyring that maps a bearer token to its role in constant time.
//
// A binding classifies each of its operations (an HTTP route, later a NATS
// subject) as one Op; Role.Allows decides. The table:
//
//	OpOpen     anyone, no token needed (health, readiness, manifest)
//	OpProduce  producer, admin (enqueue, read and cancel jobs)
//	OpWork     worker, admin   (fetch, ack, nack, heartbeat, progress)
//	OpAdmin    admin           (everything else)
//
// jetgate stores no owner per job, so "a producer reads its jobs" is
// enforced as "a producer reads any job whose id it knows": job ids are
// random UUIDv7s, and storing an owner would add a field to every job.
package authz

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"strings"
)

// Role is what a token may do. The zero Role is no role (unauthenticated).
type Role uint8

// The roles.
const (
	RoleNone Role = iota
	RoleProducer
	RoleWorker
	RoleAdmin
)

// String returns the role's name as configured: producer, worker, admin.
func (r Role) String() string {
	switch r {
	case RoleProducer:
		return "producer"
	case RoleWorker:
		return "worker"
	case RoleAdmin:
		return "admin"
	}
	return "none"
}

// ParseRole parses producer, worker or admin.
func ParseRole(s string) (Role, error) {
	switch s {
	case "producer":
		return RoleProducer, nil
	case "worker":
		return RoleWorker, nil
	case "admin":
		return RoleAdmin, nil
	}
	return RoleNone, fmt.Errorf("unknown role %q (want producer, worker or admin)", s)
}

// Op is the class of an operation a binding serves.
type Op uint8

// The operation classes.
const (
	// OpAdmin is the zero Op, so an operation a binding forgot to classify
	// needs the strongest role.
	OpAdmin Op = iota
	OpOpen
	OpProduce
	OpWork
)

// String names the class.
func (o Op) String() string {
	switch o {
	case OpOpen:
		return "open"
	case OpProduce:
		return "produce"
	case OpWork:
		return "work"
	}
	return "admin"
}

// allowed is the role table: the roles allowed each operation class.
var allowed = map[Op][]Role{
	OpOpen:    {RoleNone, RoleProducer, RoleWorker, RoleAdmin},
	OpProduce: {RoleProducer, RoleAdmin},
	OpWork:    {RoleWorker, RoleAdmin},
	OpAdmin:   {RoleAdmin},
}

// Allows reports whether r may perform an operation of class op.
func (r Role) Allows(op Op) bool {
	for _, a := range allowed[op] {
		if a == r {
			return true
		}
	}
	return false
}

// Keyring holds the configured tokens. Only SHA-256 digests are kept, so
// every comparison is over 32 bytes whatever the token's length.
type Keyring struct {
	keys []key
}

type key struct {
	digest [sha256.Size]byte
	role   Role
}

// NewKeyring builds a Keyring from tokens by role. A token may not be
// empty, contain white space, or be given to two roles; the same token
// twice for one role is kept once. No tokens at all returns nil: access
// control is off.
func NewKeyring(tokens map[Role][]string) (*Keyring, error) {
	k := &Keyring{}
	seen := map[[sha256.Size]byte]Role{}
	for _, role := range []Role{RoleProducer, RoleWorker, RoleAdmin} {
		for _, t := range tokens[role] {
			if t == "" || strings.ContainsAny(t, " \t\r\n") {
				return nil, fmt.Errorf("a %s token is empty or contains white space", role)
			}
			d := sha256.Sum256([]byte(t))
			if prev, ok := seen[d]; ok {
				if prev != role {
					return nil, fmt.Errorf("one token is configured for both %s and %s", prev, role)
				}
				continue
			}
			seen[d] = role
			k.keys = append(k.keys, key{d, role})
		}
	}
	for r := range tokens {
		if r != RoleProducer && r != RoleWorker && r != RoleAdmin {
			return nil, fmt.Errorf("tokens given for invalid role %d", r)
		}
	}
	if len(k.keys) == 0 {
		return nil, nil
	}
	return k, nil
}

// Role returns the role of token, RoleNone if it is not configured. It
// compares the token's digest with every configured digest, with no early
// exit, so its timing says nothing about which token (if any) matched.
func (k *Keyring) Role(token string) Role {
	if k == nil || token == "" {
		return RoleNone
	}
	d := sha256.Sum256([]byte(token))
	role := 0
	for i := range k.keys {
		eq := subtle.ConstantTimeCompare(d[:], k.keys[i].digest[:])
		role = subtle.ConstantTimeSelect(eq, int(k.keys[i].role), role)
	}
	return Role(role)
}

// Count returns how many tokens each role has (for the startup log).
func (k *Keyring) Count() map[Role]int {
	n := map[Role]int{}
	if k != nil {
		for _, e := range k.keys {
			n[e.role]++
		}
	}
	return n
}

// ParseTokenFile parses a tokens file: one "role token" pair per line,
// blank lines and lines starting with # ignored. The error names the line
// but never echoes a token.
func ParseTokenFile(data []byte, into map[Role][]string) error {
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) != 2 {
			return fmt.Errorf("line %d: want \"role token\" (2 fields), got %d fields", n, len(f))
		}
		role, err := ParseRole(f[0])
		if err != nil {
			return fmt.Errorf("line %d: %w", n, err)
		}
		into[role] = append(into[role], f[1])
	}
	if err := sc.Err(); err != nil {
		return errors.Join(errors.New("reading tokens file"), err)
	}
	return nil
}
