package topology

import (
	"fmt"
	"strings"
)

// Token escapes s into one NATS subject token that is also a valid KV key
// and consumer-name fragment: [A-Za-z0-9_-] pass through, every other byte
// becomes "=XX" (upper-case hex). The empty string becomes "=", which no
// escape sequence can produce. So "a.b" -> "a=2Eb", "tenant:acme" ->
// "tenant=3Aacme", and "*", ">" or spaces can never reach a subject.
func Token(s string) string {
	if s == "" {
		return "="
	}
	clean := true
	for i := 0; i < len(s); i++ {
		if !plain(s[i]) {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	const hex = "0123456789ABCDEF"
	for i := 0; i < len(s); i++ {
		c := s[i]
		if plain(c) {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('=')
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&0xF])
	}
	return b.String()
}

// Untoken reverses Token.
func Untoken(t string) (string, error) {
	if t == "=" {
		return "", nil
	}
	if !strings.Contains(t, "=") {
		for i := 0; i < len(t); i++ {
			if !plain(t[i]) {
				return "", fmt.Errorf("bad token %q: byte %q", t, t[i])
			}
		}
		return t, nil
	}
	var b strings.Builder
	for i := 0; i < len(t); i++ {
		c := t[i]
		if c != '=' {
			if !plain(c) {
				return "", fmt.Errorf("bad token %q: byte %q", t, c)
			}
			b.WriteByte(c)
			continue
		}
		if i+2 >= len(t) {
			return "", fmt.Errorf("bad token %q: short escape", t)
		}
		hi, ok1 := unhex(t[i+1])
		lo, ok2 := unhex(t[i+2])
		if !ok1 || !ok2 {
			return "", fmt.Errorf("bad token %q: bad escape", t)
		}
		b.WriteByte(hi<<4 | lo)
		i += 2
	}
	return b.String(), nil
}

func plain(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_'
}

func unhex(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}
