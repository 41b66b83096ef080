package cron

// SetAfterAdvance makes f run between a tick's compare-and-swap and the
// schedule of the next tick; an error from f ends the handling there.
func SetAfterAdvance(s *Scheduler, f func() error) { s.afterAdvance = f }
