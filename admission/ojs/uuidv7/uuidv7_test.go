package uuidv7

import (
	"bytes"
	"encoding/binary"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
)

// Ids are UUIDv7s (version 7, variant 10) of the current millisecond,
// strictly increasing, also across goroutines, and their text is the
// canonical lowercase form google/uuid parses and prints alike.
func TestGenIDs(t *testing.T) {
	t.Parallel()
	var g Gen
	const goroutines, each = 4, 2000
	out := make(chan []UUID)
	before := time.Now().UnixMilli()
	for range goroutines {
		go func() {
			ids := make([]UUID, each)
			for i := range ids {
				ids[i] = g.Next()
			}
			out <- ids
		}()
	}
	seen := make(map[UUID]bool, goroutines*each)
	for range goroutines {
		ids := <-out
		for i, u := range ids {
			if i > 0 && bytes.Compare(u[:], ids[i-1][:]) <= 0 {
				t.Fatalf("id %x not after %x", u, ids[i-1])
			}
			if seen[u] {
				t.Fatalf("id %x twice", u)
			}
			seen[u] = true
			text := u.String()
			parsed, err := uuid.Parse(text)
			if err != nil || parsed != uuid.UUID(u) || parsed.Version() != 7 || parsed.Variant() != uuid.RFC4122 {
				t.Fatalf("id %x: parsed %v version %v variant %v err %v", u, parsed, parsed.Version(), parsed.Variant(), err)
			}
			if text != parsed.String() || len(text) != StringLen {
				t.Fatalf("id %x: text %q, google/uuid prints %q", u, text, parsed.String())
			}
			if ms := int64(binary.BigEndian.Uint64(u[:8]) >> 16); ms < before || ms > time.Now().UnixMilli()+1000 {
				t.Fatalf("id %s has time %d ms, now is %d ms", parsed, ms, before)
			}
		}
	}
}

// NewString puts its prefix before a UUIDv7 of the process's generator,
// and the process's ids increase.
func TestNewString(t *testing.T) {
	t.Parallel()
	a, b := NewString("req_"), NewString("req_")
	for _, s := range []string{a, b} {
		id, ok := strings.CutPrefix(s, "req_")
		if !ok {
			t.Fatalf("%q has no prefix req_", s)
		}
		if u, err := uuid.Parse(id); err != nil || u.Version() != 7 || u.String() != id {
			t.Fatalf("%q: %v %v", s, u, err)
		}
	}
	if a >= b {
		t.Fatalf("%q not before %q", a, b)
	}
}

// BenchmarkNewString: one allocation, the string.
func BenchmarkNewString(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		_ = NewString("")
	}
}
