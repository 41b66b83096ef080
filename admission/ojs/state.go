package ojs

// State is a job lifecycle state (ojs-core.md section 6).
type State string

// The eight lifecycle states.
const (
	StateScheduled State = "scheduled"
	StateAvailable State = "available"
	StatePending   State = "pending"
	StateActive    State = "active"
	StateCompleted State = "completed"
	StateRetryable State = "retryable"
	StateCancelled State = "cancelled"
	StateDiscarded State = "discarded"
)

// States lists every state in a stable order.
var States = []State{
	StateScheduled, StateAvailable, StatePending, StateActive,
	StateCompleted, StateRetryable, StateCancelled, StateDiscarded,
}

// Terminal reports whether no automatic transition leaves s.
func (s State) Terminal() bool {
	return s == StateCompleted || s == StateCancelled || s == StateDiscarded
}

// Valid reports whether s is one of the eight states.
func (s State) Valid() bool {
	for _, v := range States {
		if s == v {
			return true
		}
	}
	return false
}

// transitions is the closed transition table of ojs-core.md section 6.3,
// with the decisions of spec/README.md: a stalled active job becomes
// retryable or discarded (decision 6), never available directly.
var transitions = map[State][]State{
	StateScheduled: {StateAvailable, StateCancelled, StateDiscarded},
	StatePending:   {StateAvailable, StateCancelled},
	StateAvailable: {StateActive, StateCancelled, StateDiscarded},
	StateActive:    {StateCompleted, StateRetryable, StateDiscarded, StateCancelled},
	StateRetryable: {StateAvailable, StateCancelled, StateDiscarded},
	StateDiscarded: {StateAvailable},
}

// CanTransition reports whether from -> to is a legal transition.
// Discarding a scheduled, available or retryable job is legal because an
// expired job (expires_at) must be discarded without running.
func CanTransition(from, to State) bool {
	for _, t := range transitions[from] {
		if t == to {
			return true
		}
	}
	return false
}
