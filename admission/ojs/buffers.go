package ojs

import "sync"

// Buffers for encoding on the hot path: a job's record (jobstore), its
// events (jetstream/events) and the HTTP answers carrying jobs (httpbind)
// are each encoded into a buffer that the write sending it no longer needs
// once it returns. Each caller says why nothing keeps the buffer after
// PutBuffer.

var buffers = sync.Pool{New: func() any { b := make([]byte, 0, 2048); return &b }}

// maxPooledBuffer is the largest buffer put back: a job with huge args or
// a fetch of many jobs should not pin its buffer.
const maxPooledBuffer = 64 << 10

// GetBuffer returns an empty buffer; give it back with PutBuffer.
func GetBuffer() *[]byte {
	b := buffers.Get().(*[]byte)
	*b = (*b)[:0]
	return b
}

// PutBuffer returns b for reuse. The caller must not use *b afterwards,
// nor anyone it handed the bytes to.
func PutBuffer(b *[]byte) {
	if cap(*b) <= maxPooledBuffer {
		buffers.Put(b)
	}
}
