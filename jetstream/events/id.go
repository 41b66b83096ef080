package events

import (
	"crypto/rand"
	"sync"
	"time"
)

// idGen makes the UUIDv7 of event ids (RFC 9562 section 5.7): 48 bits of
// Unix milliseconds, version 7, 12 bits of sub-millisecond time (rand_a,
// as google/uuid's NewV7 fills it), variant 10 and 62 random bits
// (rand_b). Ids of one generator increase strictly, like NewV7's; ids of
// different processes differ by their random bits, which come from
// crypto/rand as NewV7's do, but read 512 bytes at a time instead of one
// 16-byte read per id (NewV7 was a tenth of an event's cost). The process
// switch uuid.EnableRandPool would do the same for every uuid user in the
// process (job ids, request ids), so it is not flipped from here. The
// zero idGen is ready to use.
type idGen struct {
	mu   sync.Mutex
	last int64 // ms<<12 | sub-ms sequence of the last id
	rnd  [512]byte
	left int // random bytes not used yet, at the end of rnd
}

// next returns a new UUIDv7.
func (g *idGen) next() [16]byte {
	var u [16]byte
	now := time.Now().UnixNano()
	g.mu.Lock()
	if g.left < 8 {
		_, _ = rand.Read(g.rnd[:]) // never fails: crypto/rand crashes the program instead
		g.left = len(g.rnd)
	}
	copy(u[8:], g.rnd[len(g.rnd)-g.left:])
	g.left -= 8
	ms := now / int64(time.Millisecond)
	t := ms<<12 | (now-ms*int64(time.Millisecond))>>8 // sub-ms part in 1/4096 ms, at most 3906
	if t <= g.last {
		t = g.last + 1
	}
	g.last = t
	g.mu.Unlock()
	ms = t >> 12
	u[0], u[1], u[2], u[3], u[4], u[5] = byte(ms>>40), byte(ms>>32), byte(ms>>24), byte(ms>>16), byte(ms>>8), byte(ms)
	u[6] = 0x70 | byte(t>>8)&0x0f
	u[7] = byte(t)
	u[8] = u[8]&0x3f | 0x80
	return u
}

const hexDigits = "0123456789abcdef"

// appendUUID appends u in its canonical text form,
// xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx.
func appendUUID(b []byte, u *[16]byte) []byte {
	for i, c := range u {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			b = append(b, '-')
		}
		b = append(b, hexDigits[c>>4], hexDigits[c&0x0f])
	}
	return b
}
