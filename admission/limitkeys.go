package admission

import (
	"context"
	"sync"

	"github.com/jetgate/jetgate/admission/ojs"
	"github.com/jetgate/jetgate/kvlimits"
)

// A rate limit key named by an enqueued job can be inspected at once
// (GET /ojs/v1/rate-limits/{key} answers its policy before the first
// start): the first time this process enqueues a job of a key, the key's
// entry is created if absent (kvlimits.Store.Register, one create that
// expects no entry, or a compare-and-swap when the job's limits are
// stricter than the stored ones). Later jobs of the key cost nothing: the
// process remembers the keys it made sure of. Entries are never removed,
// so a remembered key stays true; the memory is a cache and is dropped
// whole when it grows past maxKnownKeys.

// maxKnownKeys bounds the keys a process remembers.
const maxKnownKeys = 50_000

// knownKeys is the set of rate limit keys this process made sure exist.
// The zero value is empty and ready.
type knownKeys struct {
	mu sync.Mutex
	m  map[string]struct{}
}

func (k *knownKeys) has(key string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	_, ok := k.m[key]
	return ok
}

func (k *knownKeys) add(key string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.m == nil || len(k.m) >= maxKnownKeys {
		k.m = make(map[string]struct{})
	}
	k.m[key] = struct{}{}
}

// registerLimitKey makes sure the entry of j's rate limit key exists, the
// first time this process sees the key. A failure is logged, not returned:
// the job is stored, and its first start creates the entry anyway.
func (s *Service) registerLimitKey(ctx context.Context, j *ojs.Job) {
	p := j.RateLimit
	if p == nil || s.limitKeys.has(p.Key) {
		return
	}
	if err := s.limits.Register(ctx, kvlimits.KeyEntry(p.Key), p.Limits()); err != nil {
		s.log.Warn("rate limit key not registered at enqueue; its first start will", "key", p.Key, "error", err)
		return
	}
	s.limitKeys.add(p.Key)
}
