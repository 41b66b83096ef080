package httpbind

import (
	"maps"
	"net/http"
	"slices"
	"strings"

	"github.com/jetgate/jetgate/admission/authz"
	"github.com/jetgate/jetgate/admission/ojs/wire"
)

// routeOps classifies every route as an authz operation class; the role
// table itself (which role may perform which class) lives in package authz,
// shared with any other binding. A route missing here is authz.OpAdmin
// (the zero Op): only an admin token reaches it. TestEveryRouteHasAnOp
// fails when a served route is not listed.
var routeOps = map[string]authz.Op{
	// Open: probes and discovery, no token needed.
	"GET /health":        authz.OpOpen,
	"GET /ready":         authz.OpOpen,
	"GET /ojs/manifest":  authz.OpOpen,
	"GET /ojs/v1/health": authz.OpOpen,

	// Producer: enqueue, read and cancel jobs, follow their progress,
	// submit and read workflows.
	"POST /ojs/v1/jobs":                     authz.OpProduce,
	"POST /ojs/v1/jobs/batch":               authz.OpProduce,
	"GET /ojs/v1/jobs/{id}":                 authz.OpProduce,
	"DELETE /ojs/v1/jobs/{id}":              authz.OpProduce,
	"GET /ojs/v1/jobs/{id}/progress":        authz.OpProduce,
	"GET /ojs/v1/jobs/{id}/progress/stream": authz.OpProduce,
	"POST /ojs/v1/workflows":                authz.OpProduce,
	"GET /ojs/v1/workflows/{id}":            authz.OpProduce,
	"DELETE /ojs/v1/workflows/{id}":         authz.OpProduce,

	// Worker: the job life cycle of a running attempt.
	"POST /ojs/v1/workers/fetch":      authz.OpWork,
	"POST /ojs/v1/workers/ack":        authz.OpWork,
	"POST /ojs/v1/workers/nack":       authz.OpWork,
	"POST /ojs/v1/workers/heartbeat":  authz.OpWork,
	"POST /ojs/v1/workers/beat":       authz.OpWork,
	"PUT /ojs/v1/jobs/{id}/progress":  authz.OpWork,
	"GET /ojs/v1/workers/{id}/health": authz.OpWork,

	// Issue 32: cron PUT, the admin UI's plural cron paths, and the
	// workflow listing, an operator's view (a producer reads the
	// workflows it knows by id).
	"PUT /ojs/v1/cron/{name}":     authz.OpAdmin,
	"GET /ojs/v1/crons":           authz.OpAdmin,
	"POST /ojs/v1/crons":          authz.OpAdmin,
	"GET /ojs/v1/crons/{name}":    authz.OpAdmin,
	"PUT /ojs/v1/crons/{name}":    authz.OpAdmin,
	"DELETE /ojs/v1/crons/{name}": authz.OpAdmin,
	"GET /ojs/v1/workflows":       authz.OpAdmin,

	// Admin: everything else, listed so the table is complete.
	"GET /metrics":                                  authz.OpAdmin,
	"PATCH /ojs/v1/jobs/{id}":                       authz.OpAdmin,
	"POST /ojs/v1/jobs/{id}/activate":               authz.OpAdmin,
	"GET /ojs/v1/events":                            authz.OpAdmin,
	"GET /ojs/v1/queues":                            authz.OpAdmin,
	"GET /ojs/v1/queues/{name}/stats":               authz.OpAdmin,
	"GET /ojs/v1/queues/{name}/config":              authz.OpAdmin,
	"PUT /ojs/v1/queues/{name}/config":              authz.OpAdmin,
	"GET /ojs/v1/queues/{name}/priority-stats":      authz.OpAdmin,
	"POST /ojs/v1/queues/{name}/pause":              authz.OpAdmin,
	"POST /ojs/v1/queues/{name}/resume":             authz.OpAdmin,
	"GET /ojs/v1/dead-letter":                       authz.OpAdmin,
	"GET /ojs/v1/dead-letter/stats":                 authz.OpAdmin,
	"POST /ojs/v1/dead-letter/{id}/retry":           authz.OpAdmin,
	"DELETE /ojs/v1/dead-letter/{id}":               authz.OpAdmin,
	"GET /ojs/v1/rate-limits":                       authz.OpAdmin,
	"GET /ojs/v1/rate-limits/{key}":                 authz.OpAdmin,
	"PUT /ojs/v1/rate-limits/{key}":                 authz.OpAdmin,
	"DELETE /ojs/v1/rate-limits/{key}":              authz.OpAdmin,
	"GET /ojs/v1/cron":                              authz.OpAdmin,
	"POST /ojs/v1/cron":                             authz.OpAdmin,
	"GET /ojs/v1/cron/{name}":                       authz.OpAdmin,
	"DELETE /ojs/v1/cron/{name}":                    authz.OpAdmin,
	"GET /ojs/v1/admin/dead-letter":                 authz.OpAdmin,
	"GET /ojs/v1/admin/dead-letter/stats":           authz.OpAdmin,
	"POST /ojs/v1/admin/dead-letter/{id}/retry":     authz.OpAdmin,
	"DELETE /ojs/v1/admin/dead-letter/{id}":         authz.OpAdmin,
	"GET /ojs/v1/admin/jobs":                        authz.OpAdmin,
	"GET /ojs/v1/admin/jobs/{id}":                   authz.OpAdmin,
	"POST /ojs/v1/admin/jobs/bulk/{action}":         authz.OpAdmin,
	"POST /ojs/v1/admin/jobs/{id}/cancel":           authz.OpAdmin,
	"POST /ojs/v1/admin/jobs/{id}/retry":            authz.OpAdmin,
	"GET /ojs/v1/admin/pools":                       authz.OpAdmin,
	"GET /ojs/v1/admin/pools/{pool}":                authz.OpAdmin,
	"PUT /ojs/v1/admin/pools/{pool}":                authz.OpAdmin,
	"DELETE /ojs/v1/admin/pools/{pool}":             authz.OpAdmin,
	"GET /ojs/v1/admin/queues":                      authz.OpAdmin,
	"GET /ojs/v1/admin/queues/{name}":               authz.OpAdmin,
	"POST /ojs/v1/admin/queues/{name}/pause":        authz.OpAdmin,
	"POST /ojs/v1/admin/queues/{name}/resume":       authz.OpAdmin,
	"GET /ojs/v1/admin/queues/{name}/aging":         authz.OpAdmin,
	"PUT /ojs/v1/admin/queues/{name}/aging":         authz.OpAdmin,
	"DELETE /ojs/v1/admin/queues/{name}/aging":      authz.OpAdmin,
	"GET /ojs/v1/admin/queues/{name}/config":        authz.OpAdmin,
	"PUT /ojs/v1/admin/queues/{name}/config":        authz.OpAdmin,
	"GET /ojs/v1/admin/queues/{name}/rate-limit":    authz.OpAdmin,
	"PUT /ojs/v1/admin/queues/{name}/rate-limit":    authz.OpAdmin,
	"DELETE /ojs/v1/admin/queues/{name}/rate-limit": authz.OpAdmin,
	"GET /ojs/v1/admin/scheduling/stats":            authz.OpAdmin,
	"GET /ojs/v1/admin/stats":                       authz.OpAdmin,
	"GET /ojs/v1/admin/worker-groups":               authz.OpAdmin,
	"GET /ojs/v1/admin/worker-groups/{group}":       authz.OpAdmin,
	"PUT /ojs/v1/admin/worker-groups/{group}":       authz.OpAdmin,
	"DELETE /ojs/v1/admin/worker-groups/{group}":    authz.OpAdmin,
	"GET /ojs/v1/admin/workers":                     authz.OpAdmin,
	"GET /ojs/v1/admin/workers/{id}":                authz.OpAdmin,
	"DELETE /ojs/v1/admin/workers/{id}":             authz.OpAdmin,
	"POST /ojs/v1/admin/workers/{id}/quiet":         authz.OpAdmin,
	"POST /ojs/v1/admin/workers/{id}/terminate":     authz.OpAdmin,
}

// routeOp is the operation class of a route (OpAdmin when unlisted).
func routeOp(method, path string) authz.Op { return routeOps[method+" "+path] }

// RouteOp is the operation class of the route method + path pattern
// ("POST", "/ojs/v1/jobs/{id}/activate"), OpAdmin when unlisted: other
// bindings (natsbind's tests) check they classify the same operation the
// same way.
func RouteOp(method, path string) authz.Op { return routeOp(method, path) }

// Routes lists every route of the role table as "METHOD /path", sorted:
// other bindings' tests check they serve each operation.
func Routes() []string { return slices.Sorted(maps.Keys(routeOps)) }

// authorize wraps every route (New): with Config.Auth set, a request needs
// "Authorization: Bearer <token>" with a token whose role allows op.
// Missing or unknown token: 401 unauthorized with WWW-Authenticate; a
// known token of another role: 403 forbidden. The token is never logged
// nor echoed.
func (s *server) authorize(op authz.Op, h http.Handler) http.Handler {
	if s.cfg.Auth == nil || op == authz.OpOpen {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		role := s.cfg.Auth.Role(bearerToken(r))
		if role == authz.RoleNone {
			s.writeError(w, r, errUnauthorized())
			return
		}
		if !role.Allows(op) {
			s.writeError(w, r, errForbidden(r, role, op))
			return
		}
		h.ServeHTTP(w, r)
	})
}

// bearerToken returns the token of an "Authorization: Bearer" header
// (scheme case-insensitive, RFC 6750 2.1), "" if there is none.
func bearerToken(r *http.Request) string {
	v := r.Header.Get("Authorization")
	const scheme = "bearer "
	if len(v) <= len(scheme) || !strings.EqualFold(v[:len(scheme)], scheme) {
		return ""
	}
	return strings.TrimSpace(v[len(scheme):])
}

func errUnauthorized() error { return wire.ErrUnauthorized() }

func errForbidden(r *http.Request, role authz.Role, op authz.Op) error {
	return wire.ErrForbidden(role, op, r.Method+" "+r.URL.Path)
}
