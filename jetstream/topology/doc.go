// Package topology owns the names and the shape of everything jetgate
// keeps in JetStream: streams, subjects, KV buckets and consumers (names.go
// is the one file that spells them), the escaping of user-chosen names into
// subject tokens (token.go), and their idempotent creation (Ensure).
//
// It must never read or write job data; it only declares where data lives.
package topology
