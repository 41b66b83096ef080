package jsonscan

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"
)

// Problem is what Check finds in a JSON text that encoding/json would read
// without a word but not as sent: a string that is not Unicode text (its
// bytes are not UTF-8, or an escape is half of a surrogate pair), which
// encoding/json turns into U+FFFD, or a key given twice in one object, of
// which encoding/json keeps the last and other readers the first.
type Problem struct {
	// Path is the JSON path of the member the problem is in, in the form
	// request errors name fields: "args[2]", "meta.note", "jobs[0].options.queue".
	// For a key that is not UTF-8 it is the path of its object ("" for the
	// top level).
	Path string
	// Duplicate is set for a repeated key (Path names it); otherwise a
	// string is not valid text.
	Duplicate bool
	// InKey says that the invalid text is a key of the object at Path.
	InKey bool
}

// Check walks b and returns the first Problem in document order, or nil.
// It reads every string and every object of b once and allocates only for
// objects with many keys, keys with escapes and the Problem it returns.
// It does not validate: on text that is not JSON it stops where the text
// stops making sense and returns what it found before (maybe nil); the
// caller's decoder reports the syntax error.
func Check(b []byte) *Problem {
	c := checkers.Get().(*checker)
	c.b = b
	_, p := c.value(skipSpace(b, 0))
	c.b, c.path, c.keys = nil, c.path[:0], c.keys[:0]
	if cap(c.path) <= 64 && cap(c.keys) <= 256 { // a huge body's buffers are not kept
		checkers.Put(c)
	}
	if p == malformed {
		return nil
	}
	return p
}

// malformed stops a walk over text that is not JSON.
var malformed = &Problem{}

// checkers keeps the path and key buffers of Check between calls.
var checkers = sync.Pool{New: func() any {
	return &checker{path: make([]step, 0, 16), keys: make([]keyRef, 0, 48)}
}}

// checker walks one JSON text. path holds the members from the top to the
// value being read (built into a string only for a Problem); keys holds the
// keys of the objects being read, each object's from its own offset.
type checker struct {
	b    []byte
	path []step
	keys []keyRef
}

// step is one member of a path: a key (b[start:end], the text between the
// quotes) or an array index (start < 0, index end).
type step struct{ start, end int }

// keyRef is a key of an object being read: its text b[start:end] and
// whether that text holds escapes (then it is compared decoded).
type keyRef struct {
	start, end int
	escaped    bool
}

// manyKeys is the number of keys past which an object's keys are compared
// through a map instead of one by one.
const manyKeys = 16

// What str found in a string.
const (
	strText      = iota // Unicode text
	strNotText          // bytes that are not UTF-8, or half a surrogate pair
	strMalformed        // not a JSON string
)

// value checks the value at b[i] and returns the index just past it.
func (c *checker) value(i int) (int, *Problem) {
	if i >= len(c.b) {
		return 0, malformed
	}
	switch c.b[i] {
	case '"':
		end, _, st := c.str(i)
		switch st {
		case strNotText:
			return 0, &Problem{Path: c.pathString()}
		case strMalformed:
			return 0, malformed
		}
		return end, nil
	case '{':
		return c.object(i)
	case '[':
		return c.array(i)
	}
	return valueEnd(c.b, i), nil // a number, true, false or null
}

// object checks the object at b[i]: its keys (text, and each given once)
// and its values.
func (c *checker) object(i int) (int, *Problem) {
	base := len(c.keys)
	var seen map[string]bool // past manyKeys
	i = skipSpace(c.b, i+1)
	if i < len(c.b) && c.b[i] == '}' {
		return i + 1, nil
	}
	for {
		if i >= len(c.b) || c.b[i] != '"' {
			return 0, malformed
		}
		kend, escaped, st := c.str(i)
		switch st {
		case strNotText:
			return 0, &Problem{Path: c.pathString(), InKey: true}
		case strMalformed:
			return 0, malformed
		}
		k := keyRef{start: i + 1, end: kend - 1, escaped: escaped}
		c.path = append(c.path, step{k.start, k.end})
		if c.repeated(base, k, &seen) {
			return 0, &Problem{Path: c.pathString(), Duplicate: true}
		}
		c.keys = append(c.keys, k)
		if i = skipSpace(c.b, kend); i >= len(c.b) || c.b[i] != ':' {
			return 0, malformed
		}
		vend, p := c.value(skipSpace(c.b, i+1))
		if p != nil {
			return 0, p
		}
		c.path = c.path[:len(c.path)-1]
		if i = skipSpace(c.b, vend); i >= len(c.b) {
			return 0, malformed
		}
		switch c.b[i] {
		case '}':
			c.keys = c.keys[:base]
			return i + 1, nil
		case ',':
			i = skipSpace(c.b, i+1)
		default:
			return 0, malformed
		}
	}
}

// repeated reports whether k is among the keys of the object whose keys
// start at c.keys[base]. Up to manyKeys keys it compares them one by one;
// past that every key is kept in *seen.
func (c *checker) repeated(base int, k keyRef, seen *map[string]bool) bool {
	n := len(c.keys) - base
	if n < manyKeys {
		for _, o := range c.keys[base:] {
			if c.sameKey(o, k) {
				return true
			}
		}
		return false
	}
	if *seen == nil {
		*seen = make(map[string]bool, 2*manyKeys)
		for _, o := range c.keys[base:] {
			(*seen)[c.keyText(o)] = true
		}
	}
	t := c.keyText(k)
	if (*seen)[t] {
		return true
	}
	(*seen)[t] = true
	return false
}

func (c *checker) sameKey(a, b keyRef) bool {
	if !a.escaped && !b.escaped {
		return bytes.Equal(c.b[a.start:a.end], c.b[b.start:b.end])
	}
	return c.keyText(a) == c.keyText(b)
}

// keyText is the decoded text of a key (its escapes resolved; text that
// does not decode is left as it is).
func (c *checker) keyText(k keyRef) string {
	raw := c.b[k.start:k.end]
	if !k.escaped {
		return string(raw)
	}
	var s string
	if json.Unmarshal(c.b[k.start-1:k.end+1], &s) != nil {
		return string(raw)
	}
	return s
}

// array checks the values of the array at b[i].
func (c *checker) array(i int) (int, *Problem) {
	i = skipSpace(c.b, i+1)
	if i < len(c.b) && c.b[i] == ']' {
		return i + 1, nil
	}
	for n := 0; ; n++ {
		c.path = append(c.path, step{-1, n})
		vend, p := c.value(i)
		if p != nil {
			return 0, p
		}
		c.path = c.path[:len(c.path)-1]
		if i = skipSpace(c.b, vend); i >= len(c.b) {
			return 0, malformed
		}
		switch c.b[i] {
		case ']':
			return i + 1, nil
		case ',':
			i = skipSpace(c.b, i+1)
		default:
			return 0, malformed
		}
	}
}

// str reads the string at b[i] (a quote) and returns the index just past
// it, whether it holds escapes, and whether it is Unicode text: UTF-8
// bytes, and every \u escape of a surrogate half paired with the other
// half.
func (c *checker) str(i int) (end int, escaped bool, st int) {
	b := c.b
	j := i + 1
	for j < len(b) {
		ch := b[j]
		switch {
		case ch == '"':
			return j + 1, escaped, strText
		case ch == '\\':
			escaped = true
			if j+1 >= len(b) {
				return 0, false, strMalformed
			}
			if b[j+1] != 'u' {
				j += 2
				continue
			}
			r, ok := hex4(b, j+2)
			if !ok {
				return 0, false, strMalformed
			}
			j += 6
			switch {
			case 0xDC00 <= r && r <= 0xDFFF:
				return 0, false, strNotText // a low half alone
			case 0xD800 <= r && r <= 0xDBFF:
				if j+1 >= len(b) || b[j] != '\\' || b[j+1] != 'u' {
					return 0, false, strNotText // a high half alone
				}
				lo, ok := hex4(b, j+2)
				if !ok {
					return 0, false, strMalformed
				}
				if lo < 0xDC00 || lo > 0xDFFF {
					return 0, false, strNotText
				}
				j += 6
			}
		case ch < utf8.RuneSelf:
			j++
		default:
			r, size := utf8.DecodeRune(b[j:])
			if r == utf8.RuneError && size == 1 {
				return 0, false, strNotText
			}
			j += size
		}
	}
	return 0, false, strMalformed
}

// hex4 reads the four hex digits at b[i:], if they are there.
func hex4(b []byte, i int) (rune, bool) {
	if i+4 > len(b) {
		return 0, false
	}
	var r rune
	for _, c := range b[i : i+4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// pathString writes c.path as a field path: keys joined by ".", indexes
// as "[n]". A key is written decoded, with text that is not UTF-8 shown
// as U+FFFD.
func (c *checker) pathString() string {
	var sb strings.Builder
	for _, s := range c.path {
		if s.start < 0 {
			sb.WriteByte('[')
			sb.WriteString(strconv.Itoa(s.end))
			sb.WriteByte(']')
			continue
		}
		if sb.Len() > 0 {
			sb.WriteByte('.')
		}
		k := keyRef{start: s.start, end: s.end, escaped: bytes.IndexByte(c.b[s.start:s.end], '\\') >= 0}
		sb.WriteString(strings.ToValidUTF8(c.keyText(k), "\uFFFD"))
	}
	return sb.String()
}
