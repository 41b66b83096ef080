// Package jsonscan reads the common shapes of JSON request bodies without
// encoding/json's reflection, giving the same results. Every worker
// request (fetch, ack, nack, heartbeat) and every enqueued job is read as
// an object of raw members first, so this is on the path of every job.
// encoding/json builds such an object by reflection, copying each value
// into a RawMessage of its own, and reads each string field with a decoder
// of its own: most of the allocations of a request's decoding
// (BenchmarkDecodeWorkerBodies in admission/ojs/wire, BenchmarkParseJob in
// admission/ojs). The scanners here read the common shapes directly;
// anything they do not handle (invalid JSON, keys or strings with escapes
// or non-ASCII bytes, a body that is not an object) is left to
// encoding/json by the caller, so results and errors stay encoding/json's.
// TestScanMatchesEncodingJSON and FuzzScanObject compare the two.
package jsonscan

import (
	"bytes"
	"encoding/json"
)

// Object reads b, a JSON object, as encoding/json reads it into a
// map[string]json.RawMessage, a repeated key keeping its last value. ok is false when b is not
// valid JSON, not an Object, or has a key that is not plain printable
// ASCII; the caller then decodes b with encoding/json.
//
// As with encoding/json, each value is bytes of its own, which a caller
// may even overwrite (natsbind's queryValues decodes an array into a slice
// that holds the array itself): the values are sub-slices of one copy of
// b, each capped at its own end, so a write through one of them reaches
// neither b nor another value.
func Object(b []byte) (o map[string]json.RawMessage, ok bool) {
	if !json.Valid(b) {
		return nil, false
	}
	// b is valid JSON from here on: the scan only finds the boundaries.
	i := skipSpace(b, 0)
	if b[i] != '{' {
		return nil, false
	}
	b = bytes.Clone(b)
	o = make(map[string]json.RawMessage, 4)
	i = skipSpace(b, i+1)
	if b[i] == '}' {
		return o, true
	}
	for {
		// b[i] is the opening quote of a key.
		end, plain := stringEnd(b, i)
		if !plain {
			return nil, false
		}
		key := b[i+1 : end-1]
		i = skipSpace(b, end)  // at ':'
		i = skipSpace(b, i+1)  // at the value
		vend := valueEnd(b, i) // just past the value
		o[keyString(key)] = b[i:vend:vend]
		i = skipSpace(b, vend) // at ',' or '}'
		if b[i] == '}' {
			return o, true
		}
		i = skipSpace(b, i+1)
	}
}

// keyString is string(key), without allocating for the fields of the
// worker requests and the common ones of a job.
func keyString(key []byte) string {
	switch string(key) {
	case "job_id":
		return "job_id"
	case "worker_id":
		return "worker_id"
	case "result":
		return "result"
	case "attempt":
		return "attempt"
	case "error":
		return "error"
	case "queues":
		return "queues"
	case "count":
		return "count"
	case "visibility_timeout_ms":
		return "visibility_timeout_ms"
	case "active_jobs":
		return "active_jobs"
	case "active_job_ids":
		return "active_job_ids"
	case "state":
		return "state"
	// The members of an enqueued job that the official SDKs send.
	case "type":
		return "type"
	case "args":
		return "args"
	case "meta":
		return "meta"
	case "options":
		return "options"
	case "queue":
		return "queue"
	case "priority":
		return "priority"
	case "id":
		return "id"
	case "specversion":
		return "specversion"
	case "retry":
		return "retry"
	case "tags":
		return "tags"
	case "unique":
		return "unique"
	case "timeout_ms":
		return "timeout_ms"
	case "delay_until":
		return "delay_until"
	case "scheduled_at":
		return "scheduled_at"
	case "max_attempts":
		return "max_attempts"
	}
	return string(key)
}

// skipSpace returns the index of the first byte at or after i that is not
// JSON whitespace (len(b) if none).
func skipSpace(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// stringEnd returns the index just past the string of valid JSON that
// starts at b[i] (a quote), and whether the string is plain: printable
// ASCII without escapes, so its JSON text is its value.
func stringEnd(b []byte, i int) (end int, plain bool) {
	plain = true
	for j := i + 1; j < len(b); j++ {
		switch c := b[j]; {
		case c == '"':
			return j + 1, plain
		case c == '\\':
			plain = false
			j++ // the escaped byte cannot end the string
		case c < 0x20 || c >= 0x80:
			plain = false
		}
	}
	return len(b), false // not reached on valid JSON
}

// valueEnd returns the index just past the JSON value of valid JSON that
// starts at b[i].
func valueEnd(b []byte, i int) int {
	switch b[i] {
	case '"':
		end, _ := stringEnd(b, i)
		return end
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				end, _ := stringEnd(b, j)
				j = end - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return j + 1
				}
			}
		}
		return len(b)
	}
	// A number, true, false or null: up to the next delimiter.
	j := i
	for j < len(b) {
		switch b[j] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return j
		}
		j++
	}
	return j
}

// PlainString returns the value of raw when raw is exactly a JSON string
// of printable ASCII without escapes (so the value is the text between the
// quotes, as encoding/json would decode it); ok is false otherwise.
func PlainString(raw []byte) (s string, ok bool) {
	if len(raw) < 2 || raw[0] != '"' {
		return "", false
	}
	end, plain := stringEnd(raw, 0)
	if !plain || end != len(raw) {
		return "", false
	}
	return string(raw[1 : end-1]), true
}

// PlainStrings reads raw when it is exactly a JSON array of non-empty plain
// strings (see PlainString), with no whitespace around the array: the
// common "queues" of a fetch. ok is false otherwise, and for anything
// wire.StringArray would refuse.
func PlainStrings(raw []byte) (list []string, ok bool) {
	if len(raw) < 2 || raw[0] != '[' {
		return nil, false
	}
	i := skipSpace(raw, 1)
	if i < len(raw) && raw[i] == ']' {
		return make([]string, 0), i == len(raw)-1
	}
	n := 1
	for _, c := range raw {
		if c == ',' {
			n++
		}
	}
	list = make([]string, 0, n)
	for i < len(raw) && raw[i] == '"' {
		end, plain := stringEnd(raw, i)
		if !plain || end == i+2 || end > len(raw) {
			return nil, false
		}
		list = append(list, string(raw[i+1:end-1]))
		i = skipSpace(raw, end)
		if i >= len(raw) {
			return nil, false
		}
		switch raw[i] {
		case ']':
			return list, i == len(raw)-1
		case ',':
			i = skipSpace(raw, i+1)
		default:
			return nil, false
		}
	}
	return nil, false
}
