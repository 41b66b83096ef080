package workflow

// StepJobID is stepJobID, for tests.
var StepJobID = stepJobID
