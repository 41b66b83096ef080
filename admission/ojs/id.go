package ojs

import "github.com/jetgate/jetgate/admission/ojs/uuidv7"

// idRule is the rule a job id must follow (ojs-core.md 5.1, ojs-json-format.md 6.1).
const idRule = "a lowercase UUIDv7 (8-4-4-4-12 hex)"

// NewID returns a new job id: a UUIDv7, lowercase and hyphenated
// (ojs-core.md 5.1). UUIDv7 ids sort by creation time.
func NewID() string {
	return uuidv7.NewString("")
}

// ValidID checks that s is a job id in canonical form: a lowercase,
// hyphenated UUIDv7 (version nibble 7, RFC 9562 variant 10xx), i.e.
// [0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}.
// It returns a *ValidationError for field "id" otherwise.
func ValidID(s string) error {
	if !validID(s) {
		return &ValidationError{Field: "id", Rule: idRule, Received: shorten(s)}
	}
	return nil
}

func validID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		case 14:
			if c != '7' {
				return false
			}
		case 19:
			if c != '8' && c != '9' && c != 'a' && c != 'b' {
				return false
			}
		default:
			if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
				return false
			}
		}
	}
	return true
}
