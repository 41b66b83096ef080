package topology

import (
	"strings"
	"testing"
)

// DESIGN invariant 7: names are escaped before they become subject tokens
// or KV keys; they round-trip exactly and can never inject *, >, spaces or
// empty tokens.
func TestTokenEscapesAndRoundTrips(t *testing.T) {
	t.Parallel()
	cases := map[string]string{
		"default":      "default",
		"a.b":          "a=2Eb",
		"tenant:acme":  "tenant=3Aacme",
		"*":            "=2A",
		">":            "=3E",
		"with space":   "with=20space",
		"":             "=",
		"=":            "=3D",
		"ünï":          "=C3=BCn=C3=AF",
		"MiXed-Case_9": "MiXed-Case_9",
	}
	for in, want := range cases {
		got := Token(in)
		if got != want {
			t.Errorf("Token(%q) = %q, want %q", in, got, want)
		}
		back, err := Untoken(got)
		if err != nil || back != in {
			t.Errorf("Untoken(%q) = %q, %v; want %q", got, back, err, in)
		}
	}
}

func TestReadySubjectHasFixedTokens(t *testing.T) {
	t.Parallel()
	s := ReadySubject("eu.mail", 7, "a.b*>")
	if s != "ojs.ready.eu=2Email.007.a=2Eb=2A=3E" {
		t.Fatalf("ReadySubject = %q", s)
	}
	if n := strings.Count(s, "."); n != 4 {
		t.Fatalf("ReadySubject %q has %d dots, want 4", s, n)
	}
	for _, subj := range []string{s, ReadyLegacySubject("eu.mail", 7)} {
		if q, p, ok := ReadyLevelOf(subj); !ok || q != "eu=2Email" || p != 7 {
			t.Fatalf("ReadyLevelOf(%q) = %q, %d, %v", subj, q, p, ok)
		}
	}
}

func TestUntokenRejectsMalformed(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{"=", "a=", "a=4", "a=zz", "a.b", "a*"} {
		if bad == "=" {
			continue // the empty name
		}
		if _, err := Untoken(bad); err == nil {
			t.Errorf("Untoken(%q) accepted a malformed token", bad)
		}
	}
}

func FuzzToken(f *testing.F) {
	for _, s := range []string{"", "a.b", "*", ">", " ", "tenant:acme", "=", "=3D"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tok := Token(s)
		if tok == "" || strings.ContainsAny(tok, ".*> \t\r\n") {
			t.Fatalf("Token(%q) = %q is not a single safe token", s, tok)
		}
		back, err := Untoken(tok)
		if err != nil || back != s {
			t.Fatalf("round trip of %q: %q, %v", s, back, err)
		}
	})
}
