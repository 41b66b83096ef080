package jobstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetgate/jetgate/admission/ojs"
	"github.com/jetgate/jetgate/jetstream/topology"
)

// GetGroup reads a worker group from OJS_GROUPS.
func (s *Store) GetGroup(ctx context.Context, name string) (*ojs.WorkerGroup, error) {
	e, err := s.assets.Groups.Get(ctx, topology.Token(name))
	if err != nil {
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			return nil, &ojs.NotFoundError{Resource: "worker group", ID: name}
		}
		return nil, fmt.Errorf("get worker group %s: %w", name, Unavailable(err))
	}
	return DecodeGroup(e)
}

// PutGroup writes a worker group, replacing any earlier one.
func (s *Store) PutGroup(ctx context.Context, g *ojs.WorkerGroup) error {
	b, err := json.Marshal(g)
	if err != nil {
		return fmt.Errorf("encode worker group %s: %w", g.Name, err)
	}
	if _, err := s.assets.Groups.Put(ctx, topology.Token(g.Name), b); err != nil {
		return fmt.Errorf("put worker group %s: %w", g.Name, Unavailable(err))
	}
	return nil
}

// DeleteGroup removes a worker group; a missing one is a NotFoundError.
func (s *Store) DeleteGroup(ctx context.Context, name string) error {
	if _, err := s.GetGroup(ctx, name); err != nil {
		return err
	}
	if err := s.assets.Groups.Delete(ctx, topology.Token(name)); err != nil {
		return fmt.Errorf("delete worker group %s: %w", name, Unavailable(err))
	}
	return nil
}

// WatchGroups streams every worker group, then each change, until ctx ends.
func (s *Store) WatchGroups(ctx context.Context) (jetstream.KeyWatcher, error) {
	w, err := s.assets.Groups.WatchAll(ctx)
	if err != nil {
		return nil, fmt.Errorf("watch worker groups: %w", Unavailable(err))
	}
	return w, nil
}

// DecodeGroup reads a worker group from a KV entry.
func DecodeGroup(e jetstream.KeyValueEntry) (*ojs.WorkerGroup, error) {
	var g ojs.WorkerGroup
	if err := json.Unmarshal(e.Value(), &g); err != nil {
		return nil, fmt.Errorf("decode worker group %s: %w", e.Key(), err)
	}
	return &g, nil
}
