package workflow

// StepJobID is stepJobID, for tests.
var StepJobID = stepJobID

// SetMaxScan bounds the records one listing page reads.
func SetMaxScan(e *Engine, n int) { e.cfg.MaxScan = n }
