package ojs

import (
	"errors"
	"strings"
	"testing"
)

// ojs-core 5.1 id: UUIDv7, lowercase, 8-4-4-4-12; L0-ENV-002 generates one.
func TestNewID(t *testing.T) {
	t.Parallel()
	seen := make(map[string]bool)
	prev := ""
	for range 1000 {
		id := NewID()
		if err := ValidID(id); err != nil {
			t.Fatalf("NewID() = %q: %v", id, err)
		}
		if seen[id] {
			t.Fatalf("NewID() repeated %q", id)
		}
		seen[id] = true
		// UUIDv7 sorts by creation time (google/uuid keeps ids monotonic
		// within one process).
		if id <= prev {
			t.Fatalf("NewID() = %q after %q: not increasing", id, prev)
		}
		prev = id
	}
}

func TestValidID(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		id   string
		ok   bool
	}{
		{"core 13.1 example", "019461a8-1a2b-7c3d-8e4f-5a6b7c8d9e0f", true},
		{"json-format 6.1 example", "019539a4-b68c-7def-8000-1a2b3c4d5e6f", true},
		{"variant 9", "019539a4-b68c-7def-9000-1a2b3c4d5e6f", true},
		{"variant a", "019539a4-b68c-7def-a000-1a2b3c4d5e6f", true},
		{"variant b", "019539a4-b68c-7def-b000-1a2b3c4d5e6f", true},
		{"uppercase", "019539A4-B68C-7DEF-8000-1A2B3C4D5E6F", false},
		{"version 4", "019539a4-b68c-4def-8000-1a2b3c4d5e6f", false},
		{"variant c (Microsoft)", "019539a4-b68c-7def-c000-1a2b3c4d5e6f", false},
		{"variant 7 (NCS)", "019539a4-b68c-7def-7000-1a2b3c4d5e6f", false},
		{"no hyphens", "019539a4b68c7def80001a2b3c4d5e6f", false},
		{"braces", "{019539a4-b68c-7def-8000-1a2b3c4d5e6f}", false},
		{"urn", "urn:uuid:019539a4-b68c-7def-8000-1a2b3c4d5e6f", false},
		{"hyphen moved", "019539a4b-68c-7def-8000-1a2b3c4d5e6f", false},
		{"non-hex", "019539a4-b68c-7def-8000-1a2b3c4d5e6g", false},
		{"short", "019539a4-b68c-7def-8000-1a2b3c4d5e6", false},
		{"empty", "", false},
		{"nil uuid", "00000000-0000-0000-0000-000000000000", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := ValidID(tt.id)
			if (err == nil) != tt.ok {
				t.Fatalf("ValidID(%q) = %v, want ok=%v", tt.id, err, tt.ok)
			}
			if err == nil {
				return
			}
			var ve *ValidationError
			if !errors.As(err, &ve) || ve.Field != "id" || ve.Rule != idRule {
				t.Fatalf("ValidID(%q) = %#v, want ValidationError on id", tt.id, err)
			}
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "UUIDv7") {
				t.Fatalf("ValidID(%q) error %q", tt.id, err)
			}
		})
	}
}
