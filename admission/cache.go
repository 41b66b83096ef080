package admission

import (
	"sync"

	"github.com/jetgate/jetgate/admission/ojs"
)

// recordCache remembers the last record this process wrote for a job and
// its revision, so the next transition of that job can go straight to the
// compare-and-swap instead of reading first. It is only a cache: a stale
// entry makes the CAS fail, and the transition then reads the record and
// decides again. A CAS that succeeds proves the cached record was current.
type recordCache struct {
	mu      sync.Mutex
	max     int
	entries map[string]cachedRecord
}

type cachedRecord struct {
	job *ojs.Job
	rev uint64
}

func newRecordCache(max int) *recordCache {
	return &recordCache{max: max, entries: make(map[string]cachedRecord, 1024)}
}

// get returns the cached record of id; the job must not be mutated.
func (c *recordCache) get(id string) (*ojs.Job, uint64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[id]
	return e.job, e.rev, ok
}

// put remembers j at rev; terminal jobs are forgotten, since no transition
// (but a dead letter retry) follows them.
func (c *recordCache) put(j *ojs.Job, rev uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if j.State.Terminal() {
		delete(c.entries, j.ID)
		return
	}
	if len(c.entries) >= c.max {
		// Evict an arbitrary tenth; map order is random enough.
		n := c.max / 10
		for k := range c.entries {
			delete(c.entries, k)
			if n--; n <= 0 {
				break
			}
		}
	}
	c.entries[j.ID] = cachedRecord{job: j, rev: rev}
}

func (c *recordCache) drop(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.entries, id)
}
