package jobstore

import (
	"context"
	"sync"

	"github.com/nats-io/nats.go/jetstream"
)

// FollowKV keeps a cache of a bucket current: a goroutine, counted in wg,
// hands every entry of w to apply (puts, deletes and purges alike), first
// the bucket's current values and then each change, until runCtx ends or
// the watcher closes; it stops w then. FollowKV returns once the current
// values are applied, or with ctx's error if ctx ends first (the goroutine
// goes on until runCtx ends).
func FollowKV(ctx, runCtx context.Context, wg *sync.WaitGroup, w jetstream.KeyWatcher, apply func(jetstream.KeyValueEntry)) error {
	loaded := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer func() { _ = w.Stop() }()
		initial := loaded
		for {
			select {
			case <-runCtx.Done():
				return
			case e, ok := <-w.Updates():
				if !ok {
					return
				}
				if e == nil { // the end of the current values
					if initial != nil {
						close(initial)
						initial = nil
					}
					continue
				}
				apply(e)
			}
		}
	}()
	select {
	case <-loaded:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
