package ojs

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
)

// MaxQueueWeight bounds a queue's weight in weighted consumption.
const MaxQueueWeight = 1000

// WorkerGroup is a server-level default of queue consumption for the
// workers that name it in their fetch (ojs-priority.md 7.3: "worker-level
// or backend-level configuration"). A fetch naming the group takes its
// queues when it lists none, its strategy when it gives none, and its
// weights for the queues the fetch gives no weight of its own.
type WorkerGroup struct {
	Name     string `json:"name"`
	Strategy string `json:"strategy"`
	// Queues in the order strict consumption tries them.
	Queues []string `json:"queues"`
	// Weights of the queues under the weighted strategy; a listed queue
	// without one has weight 1, weight 0 leaves it out.
	Weights   map[string]int `json:"weights,omitempty"`
	UpdatedAt *Time          `json:"updated_at,omitempty"`
	// Concurrency is a worker pool's declared concurrency
	// (ojs-fair-scheduling.md 6.1); reported, not enforced.
	Concurrency int `json:"concurrency,omitempty"`
}

// StrategyRoundRobin gives every queue of a group the same attention
// (ojs-fair-scheduling.md 7.1): weighted consumption with equal weights.
const StrategyRoundRobin = "round-robin"

var groupNameRule = `a group name matching [a-z0-9][a-z0-9\-\.]* of at most 128 characters`

// ValidGroupName tells whether name is a worker group name: the pattern
// of queue names.
func ValidGroupName(name string) bool { return validQueue(name) }

// Validate checks a group's fields; errors name the field and the rule.
func (g *WorkerGroup) Validate() error {
	if !ValidGroupName(g.Name) {
		return &ValidationError{Field: "name", Rule: groupNameRule, Received: strconv.Quote(g.Name)}
	}
	switch g.Strategy {
	case StrategyStrict, StrategyWeighted, StrategyRoundRobin:
	default:
		return &ValidationError{Field: "strategy", Rule: `"strict", "weighted" or "round-robin"`, Received: strconv.Quote(g.Strategy)}
	}
	if g.Concurrency < 0 {
		return &ValidationError{Field: "concurrency", Rule: "an integer >= 1", Received: strconv.Itoa(g.Concurrency)}
	}
	if len(g.Queues) == 0 {
		return &ValidationError{Field: "queues", Rule: "a non-empty array of queue names"}
	}
	for i, q := range g.Queues {
		field := fmt.Sprintf("queues[%d]", i)
		if !validQueue(q) {
			return &ValidationError{Field: field, Rule: queueRule, Received: strconv.Quote(q)}
		}
		if slices.Index(g.Queues, q) != i {
			return &ValidationError{Field: field, Rule: "a queue not listed before", Received: strconv.Quote(q)}
		}
	}
	return g.validateWeights()
}

func (g *WorkerGroup) validateWeights() error {
	polled := 0
	for _, q := range g.Queues {
		if w, ok := g.Weights[q]; !ok || w > 0 {
			polled++
		}
	}
	for q, w := range g.Weights {
		switch {
		case !slices.Contains(g.Queues, q):
			return &ValidationError{Field: "weights." + q, Rule: "the weight of a queue listed in queues"}
		case w < 0 || w > MaxQueueWeight:
			return &ValidationError{Field: "weights." + q, Rule: fmt.Sprintf("an integer from 0 to %d", MaxQueueWeight),
				Received: strconv.Itoa(w)}
		}
	}
	if g.Strategy == StrategyWeighted && polled == 0 {
		return &ValidationError{Field: "weights", Rule: "a weight above 0 for at least one queue"}
	}
	return nil
}

// ApplyGroup fills in what req leaves to its group g (see WorkerGroup).
func (req FetchRequest) ApplyGroup(g *WorkerGroup) FetchRequest {
	if len(req.Queues) == 0 {
		req.Queues = slices.Clone(g.Queues)
	}
	if req.Strategy == "" {
		req.Strategy = g.Strategy
	}
	if req.Strategy == StrategyRoundRobin {
		req.Strategy = StrategyWeighted
		return req // every queue weighs 1
	}
	if len(g.Weights) > 0 {
		w := maps.Clone(g.Weights)
		maps.Copy(w, req.Weights)
		req.Weights = w
	}
	return req
}
