package metrics

import (
	"cmp"
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/jetgate/jetgate/admission/ojs"
)

// maxCached bounds the attribute sets kept per cache. Label values are
// bounded (queues x job types) by the spec's cardinality rules; past this
// many the sets are built per call instead of growing without end.
const maxCached = 4096

type jobKey struct{ queue, jobType string }

// jobAttrs are the measurement options of one (queue, type) pair, built
// once so that recording allocates nothing of ours.
type jobAttrs struct {
	add                                        []metric.AddOption
	rec                                        []metric.RecordOption
	completed, retryable, discarded, cancelled []metric.RecordOption
}

func newJobAttrs(k jobKey) *jobAttrs {
	q, t := attribute.String(LabelQueue, k.queue), attribute.String(LabelType, k.jobType)
	base := metric.WithAttributeSet(attribute.NewSet(q, t))
	state := func(s ojs.State) []metric.RecordOption {
		return []metric.RecordOption{metric.WithAttributeSet(attribute.NewSet(q, t, attribute.String(LabelState, string(s))))}
	}
	return &jobAttrs{
		add:       []metric.AddOption{base},
		rec:       []metric.RecordOption{base},
		completed: state(ojs.StateCompleted),
		retryable: state(ojs.StateRetryable),
		discarded: state(ojs.StateDiscarded),
		cancelled: state(ojs.StateCancelled),
	}
}

func newQueueAttrs(queue string) []metric.RecordOption {
	return []metric.RecordOption{metric.WithAttributeSet(attribute.NewSet(attribute.String(LabelQueue, queue)))}
}

type outcomeKey struct{ queue, jobType, outcome string }

func newOutcomeAttrs(k outcomeKey) []metric.RecordOption {
	return []metric.RecordOption{metric.WithAttributeSet(attribute.NewSet(
		attribute.String(LabelQueue, k.queue), attribute.String(LabelType, k.jobType), attribute.String(LabelOutcome, k.outcome)))}
}

type priorityKey struct {
	queue    string
	priority int
}

func newPriorityAttrs(k priorityKey) []metric.RecordOption {
	return []metric.RecordOption{metric.WithAttributeSet(attribute.NewSet(
		attribute.String(LabelQueue, k.queue), attribute.Int(LabelPriority, k.priority)))}
}

// cache is a copy-on-write map: reads are one atomic load and a map lookup
// (no lock, no allocation); a miss copies the map under a mutex.
type cache[K comparable, V any] struct {
	m     atomic.Pointer[map[K]V]
	mu    sync.Mutex
	build func(K) V
	limit int // entries kept; 0 means maxCached
}

func (c *cache[K, V]) get(k K) V {
	if m := c.m.Load(); m != nil {
		if v, ok := (*m)[k]; ok {
			return v
		}
	}
	return c.add(k)
}

func (c *cache[K, V]) add(k K) V {
	c.mu.Lock()
	defer c.mu.Unlock()
	var old map[K]V
	if p := c.m.Load(); p != nil {
		old = *p
	}
	if v, ok := old[k]; ok {
		return v
	}
	v := c.build(k)
	if len(old) >= cmp.Or(c.limit, maxCached) {
		return v
	}
	next := make(map[K]V, len(old)+1)
	for ok, ov := range old {
		next[ok] = ov
	}
	next[k] = v
	c.m.Store(&next)
	return v
}
