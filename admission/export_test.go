package admission

// FlushStats publishes this process's aggregated statistics now, so tests
// can check the numbers JetStream holds without waiting for the ticker.
func (s *Service) FlushStats() { s.flushStats() }
