package app

import (
	"context"

	"github.com/jetgate/jetgate/admission/authz"
	"github.com/jetgate/jetgate/natsbind"
)

// startNatsAPI serves the OJS operations as the NATS micro service "ojs"
// (issue 19) on jetgate's connection, over the same backend value and
// tokens as HTTP. Off with Config.NoNatsAPI.
func (s *Server) startNatsAPI(b natsbind.Backend, keys *authz.Keyring) error {
	if s.cfg.NoNatsAPI {
		return nil
	}
	api, err := natsbind.New(s.nc, b, natsbind.Config{
		Prefix:        s.cfg.NatsAPIPrefix,
		Version:       Version,
		Auth:          keys,
		MaxBodyBytes:  s.cfg.MaxBodyBytes,
		MaxFetchCount: s.cfg.MaxFetchCount,
		Logger:        s.log.With("component", "nats-api"),
	})
	if err != nil {
		return err
	}
	if err := api.Start(context.Background()); err != nil {
		return err
	}
	s.natsAPI = api
	return nil
}

// stopNatsAPI stops taking NATS requests and waits for those in flight.
func (s *Server) stopNatsAPI() {
	if s.natsAPI != nil {
		s.natsAPI.Stop()
	}
}

// NatsAPI is the NATS binding, or nil when it is off.
func (s *Server) NatsAPI() *natsbind.Service { return s.natsAPI }
