package wire

import "testing"

// BenchmarkDecodeWorkerBodies decodes the bodies of the worker requests on
// every job's path, as the HTTP and NATS bindings receive them.
//
//	go test -run '^$' -bench DecodeWorkerBodies -benchmem ./admission/ojs/wire
func BenchmarkDecodeWorkerBodies(b *testing.B) {
	ack := []byte(`{"job_id":"019414d4-8b2e-7c3a-b5d1-f0e2a3b4c5d6","result":{"ok":true}}`)
	fetch := []byte(`{"queues":["email"],"count":10,"worker_id":"worker-1"}`)
	b.Run("ack", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			if _, err := DecodeAck(ack); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("fetch", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			if _, err := DecodeFetch(fetch, 1000); err != nil {
				b.Fatal(err)
			}
		}
	})
}
