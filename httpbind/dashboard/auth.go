package dashboard

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/jetgate/jetgate/admission/authz"
	"github.com/jetgate/jetgate/admission/ojs"
	"github.com/jetgate/jetgate/admission/ojs/wire"
)

// Access control. A browser cannot send an Authorization header with a
// page load or an EventSource, so besides "Authorization: Bearer <token>"
// (scripts, curl) the dashboard takes the token from:
//
//   - the query parameter token, once: GET /?token=<admin token> checks
//     it, sets the cookie below and redirects to "/", so the token leaves
//     the address bar and the history at once; any dashboard path accepts
//     it the same way (without the redirect);
//   - the cookie jetgate_dashboard: HttpOnly (scripts on the page cannot
//     read it), SameSite=Strict (no other site's page sends it), Secure
//     when the request came over TLS, Path=/, no expiry (gone when the
//     browser closes). Its value is the token, base64url-encoded so any
//     token fits a cookie. The OJS API routes never read this cookie: it
//     opens the dashboard only.
//
// The role table is authz's: the dashboard is authz.OpAdmin, so only an
// admin token opens it. Missing or unknown token: 401 (the page answers a
// small form asking for the token; the other paths the OJS error
// envelope); a token of another role: 403. The token is never logged nor
// echoed; responses carry Referrer-Policy: no-referrer.
const (
	tokenParam = "token"
	cookieName = "jetgate_dashboard"
)

// authorize reports whether r may see the dashboard; if not, it has
// answered. A valid token that came as the query parameter is stored in
// the cookie.
func (d *Dashboard) authorize(w http.ResponseWriter, r *http.Request) bool {
	if d.cfg.Auth == nil {
		return true
	}
	token, fromQuery := requestToken(r)
	role := d.cfg.Auth.Role(token)
	switch {
	case role == authz.RoleNone:
		if fromQuery {
			clearCookie(w, r)
		}
		d.unauthorized(w, r, token != "")
		return false
	case !role.Allows(authz.OpAdmin):
		writeError(w, http.StatusForbidden, ojs.CodeForbidden,
			"the "+role.String()+" role may not open the dashboard: it needs an admin token")
		return false
	}
	if fromQuery {
		http.SetCookie(w, &http.Cookie{
			Name: cookieName, Value: base64.RawURLEncoding.EncodeToString([]byte(token)),
			Path: "/", HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode,
		})
	}
	return true
}

// requestToken returns the token of r: the bearer header first, then the
// query parameter, then the cookie. fromQuery tells the query parameter
// gave it.
func requestToken(r *http.Request) (token string, fromQuery bool) {
	v := r.Header.Get("Authorization")
	if len(v) > len("bearer ") && strings.EqualFold(v[:len("bearer ")], "bearer ") {
		return strings.TrimSpace(v[len("bearer "):]), false
	}
	if q := r.URL.Query(); q.Has(tokenParam) {
		return q.Get(tokenParam), true
	}
	if c, err := r.Cookie(cookieName); err == nil {
		if b, err := base64.RawURLEncoding.DecodeString(c.Value); err == nil {
			return string(b), false
		}
	}
	return "", false
}

func clearCookie(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: "", Path: "/", MaxAge: -1,
		HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode})
}

// unauthorized answers 401: the login form for the page, the envelope for
// the other paths.
func (d *Dashboard) unauthorized(w http.ResponseWriter, r *http.Request, wrong bool) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="jetgate"`)
	if r.URL.Path != PagePath {
		writeError(w, http.StatusUnauthorized, ojs.CodeUnauthorized, "an admin token is required")
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Security-Policy", "default-src 'self'; base-uri 'none'; frame-ancestors 'none'; form-action 'self'")
	w.WriteHeader(http.StatusUnauthorized)
	msg := "This jetgate requires an admin token to open the dashboard."
	if wrong {
		msg = "That token does not open the dashboard: it is not a configured token."
	}
	_, _ = w.Write([]byte(`<!doctype html><html lang="en"><head><meta charset="utf-8">` +
		`<meta name="viewport" content="width=device-width, initial-scale=1">` +
		`<title>jetgate dashboard: sign in</title><link rel="stylesheet" href="` + assetsPath + `dashboard.css"></head>` +
		`<body class="login"><main><h1>jetgate</h1><p>` + msg + `</p>` +
		`<form method="get" action="/"><label>Admin token <input type="password" name="token" autocomplete="off" autofocus required></label>` +
		`<button type="submit">Open</button></form></main></body></html>`))
}

// writeError writes the OJS error envelope (the HTTP binding's shape,
// wire.Error's: with its type, hint and docs_url); a 5xx is retryable.
func writeError(w http.ResponseWriter, status int, code, msg string) {
	b, _ := json.Marshal(wire.Error{Status: status, Code: code, Message: msg, Retryable: status >= 500}.Envelope(""))
	w.Header().Set("Content-Type", "application/openjobspec+json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}
