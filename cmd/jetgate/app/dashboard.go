package app

import (
	"net/http"

	"github.com/jetgate/jetgate/admission/authz"
	"github.com/jetgate/jetgate/httpbind/dashboard"
)

// mountDashboard serves the web dashboard (package httpbind/dashboard) at
// "/" and under /dashboard/ in front of the OJS binding h, unless
// --dashboard=false. It reads the same backend as the binding and the
// same admin tokens guard it.
func (s *Server) mountDashboard(h http.Handler, b backend, keys *authz.Keyring) (http.Handler, error) {
	if s.cfg.DisableDashboard {
		return h, nil
	}
	d, err := dashboard.New(b, dashboard.Config{Auth: keys, Version: Version,
		Logger: s.log.With("component", "dashboard")})
	if err != nil {
		return nil, err
	}
	s.dash = d
	return d.Wrap(h), nil
}

// stopDashboard ends the dashboard's streams and its feeder (safe without
// a dashboard, and twice).
func (s *Server) stopDashboard() {
	if s.dash != nil {
		s.dash.Close()
	}
}
