package topology_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/jetgate/jetgate/jetstream/natstest"
	"github.com/jetgate/jetgate/jetstream/topology"
)

// Required names exactly the streams Ensure creates, so a readiness check
// built on it can neither miss an asset nor wait for one that never comes.
func TestRequiredMatchesEnsure(t *testing.T) {
	t.Parallel()
	s := natstest.RunServer(t)
	_, js := natstest.Connect(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := topology.Ensure(ctx, js, topology.Config{}); err != nil {
		t.Fatal(err)
	}
	var have []string
	names := js.StreamNames(ctx)
	for n := range names.Name() {
		have = append(have, n)
	}
	if err := names.Err(); err != nil {
		t.Fatal(err)
	}
	want := topology.Required()
	slices.Sort(have)
	slices.Sort(want)
	if !slices.Equal(have, want) {
		t.Fatalf("Ensure created %v, Required lists %v", have, want)
	}
}
