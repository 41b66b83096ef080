package authz

import (
	"strings"
	"testing"
)

// TestRoleTable pins the role table of issue 20 (producer: enqueue and read
// jobs; worker: fetch, ack, nack, heartbeat, progress; admin: everything).
func TestRoleTable(t *testing.T) {
	want := map[Role]map[Op]bool{
		RoleNone:     {OpOpen: true},
		RoleProducer: {OpOpen: true, OpProduce: true},
		RoleWorker:   {OpOpen: true, OpWork: true},
		RoleAdmin:    {OpOpen: true, OpProduce: true, OpWork: true, OpAdmin: true},
	}
	for r, ops := range want {
		for _, op := range []Op{OpOpen, OpProduce, OpWork, OpAdmin} {
			if got := r.Allows(op); got != ops[op] {
				t.Errorf("%s.Allows(%s) = %v, want %v", r, op, got, ops[op])
			}
		}
	}
	var zero Op
	if zero != OpAdmin {
		t.Error("an unclassified (zero) Op must need the admin role")
	}
}

// TestKeyringMatch: several tokens per role each map to their role; an
// unknown, empty or prefix/extension of a token maps to none.
func TestKeyringMatch(t *testing.T) {
	k, err := NewKeyring(map[Role][]string{
		RoleProducer: {"p1", "p2"}, RoleWorker: {"w1", "w2"}, RoleAdmin: {"a1"},
	})
	if err != nil {
		t.Fatal(err)
	}
	for tok, want := range map[string]Role{
		"p1": RoleProducer, "p2": RoleProducer, "w1": RoleWorker, "w2": RoleWorker, "a1": RoleAdmin,
		"": RoleNone, "p": RoleNone, "p12": RoleNone, "P1": RoleNone, "a1 ": RoleNone, "x": RoleNone,
	} {
		if got := k.Role(tok); got != want {
			t.Errorf("Role(%q) = %s, want %s", tok, got, want)
		}
	}
	if c := k.Count(); c[RoleProducer] != 2 || c[RoleWorker] != 2 || c[RoleAdmin] != 1 {
		t.Errorf("Count = %v", c)
	}
}

func TestKeyringRefuses(t *testing.T) {
	for name, m := range map[string]map[Role][]string{
		"empty token":  {RoleAdmin: {""}},
		"space":        {RoleAdmin: {"a b"}},
		"two roles":    {RoleAdmin: {"t"}, RoleWorker: {"t"}},
		"invalid role": {RoleNone: {"t"}},
	} {
		if _, err := NewKeyring(m); err == nil {
			t.Errorf("%s: NewKeyring accepted it", name)
		} else if strings.Contains(err.Error(), "a b") {
			t.Errorf("%s: error echoes the token: %v", name, err)
		}
	}
	k, err := NewKeyring(nil)
	if err != nil || k != nil {
		t.Fatalf("no tokens: got %v, %v; want nil keyring (auth off)", k, err)
	}
	if k.Role("anything") != RoleNone {
		t.Error("nil keyring matched a token")
	}
}

func TestParseTokenFile(t *testing.T) {
	m := map[Role][]string{}
	err := ParseTokenFile([]byte("# comment\n\nproducer p1\nproducer  p2\nworker\tw1\nadmin a1\n"), m)
	if err != nil {
		t.Fatal(err)
	}
	if len(m[RoleProducer]) != 2 || m[RoleWorker][0] != "w1" || m[RoleAdmin][0] != "a1" {
		t.Fatalf("parsed %v", m)
	}
	for _, bad := range []string{"root secret1\n", "admin\n", "admin a b\n"} {
		err := ParseTokenFile([]byte(bad), map[Role][]string{})
		if err == nil {
			t.Errorf("%q accepted", bad)
		} else if strings.Contains(err.Error(), "secret1") {
			t.Errorf("error echoes a token: %v", err)
		}
	}
}
