package httpbind

import (
	"go/ast"
	"go/parser"
	"go/token"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"github.com/gorilla/mux"

	"github.com/jetgate/jetgate/admission/ojs"
	"github.com/jetgate/jetgate/admission/ojs/wire"
)

// everyBackend implements Backend and every optional interface, so New
// registers every route httpbind has. Its methods are never called.
type everyBackend struct {
	Backend
	AdminBackend
	BackpressureBackend
	PoolBackend
	PriorityBackend
	TimeoutBackend
	PriorityAdminBackend
	ProgressBackend
	RateLimitBackend
	WorkerBackend
	CronBackend
	WorkflowBackend
}

// A method shared by two embedded interfaces would make the selector
// ambiguous and the interface silently unimplemented: these fail to
// compile instead.
var (
	_ Backend              = everyBackend{}
	_ AdminBackend         = everyBackend{}
	_ BackpressureBackend  = everyBackend{}
	_ PoolBackend          = everyBackend{}
	_ PriorityBackend      = everyBackend{}
	_ TimeoutBackend       = everyBackend{}
	_ PriorityAdminBackend = everyBackend{}
	_ ProgressBackend      = everyBackend{}
	_ RateLimitBackend     = everyBackend{}
	_ WorkerBackend        = everyBackend{}
	_ CronBackend          = everyBackend{}
	_ WorkflowBackend      = everyBackend{}
)

const referencePath = "../docs/reference.md"

// TestReferenceNamesEveryRoute keeps docs/reference.md true: every
// METHOD path the handler serves (HEAD aside: every GET answers it) must
// be named in a heading of the reference. Path variables are compared
// without their names ("{id}" and "{job}" are the same).
func TestReferenceNamesEveryRoute(t *testing.T) {
	served := servedRoutes(t)
	doc, err := os.ReadFile(referencePath)
	if err != nil {
		t.Fatal(err)
	}
	documented := referenceRoutes(string(doc))
	var missing []string
	for _, r := range served {
		if !documented[normalizeRoute(r)] {
			missing = append(missing, r)
		}
	}
	for _, r := range missing {
		t.Errorf("%s is served but no heading of docs/reference.md names it", r)
	}
	if len(missing) > 0 {
		t.Log("headings name routes in code spans: `GET /ojs/v1/x`, `GET/PUT /ojs/v1/x/{id}`; " +
			"after one, `.../y` replaces the last segment and `DELETE` alone reuses the path")
	}
}

// TestReferenceRoutesAreServed is the other direction: a heading naming a
// route the handler does not serve is a documentation error too.
func TestReferenceRoutesAreServed(t *testing.T) {
	served := map[string]bool{}
	for _, r := range servedRoutes(t) {
		served[normalizeRoute(r)] = true
	}
	doc, err := os.ReadFile(referencePath)
	if err != nil {
		t.Fatal(err)
	}
	for r := range referenceRoutes(string(doc)) {
		if !served[r] {
			t.Errorf("docs/reference.md names %s, which is not served", r)
		}
	}
}

// TestReferenceRouteTablesCovered checks that servedRoutes sees every row
// of the route tables in the source: a route registered only for a new
// optional interface that everyBackend does not embed would otherwise go
// unchecked.
func TestReferenceRouteTablesCovered(t *testing.T) {
	served := map[string]bool{}
	for _, r := range servedRoutes(t) {
		served[r] = true
	}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	// Path constants (queueAgingPath = "/ojs/...") and the rows of the
	// route tables ({http.MethodGet, "/ojs/...", ...} or with a constant).
	constRE := regexp.MustCompile(`(?m)^\s*(?:const\s+)?(\w+)\s*=\s*"(/[^"]*)"`)
	rowRE := regexp.MustCompile(`\{http\.Method(\w+),\s*("(/[^"]*)"|(\w+)),`)
	consts := map[string]string{}
	var sources []string
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		sources = append(sources, string(b))
		for _, m := range constRE.FindAllStringSubmatch(string(b), -1) {
			consts[m[1]] = m[2]
		}
	}
	rows := 0
	for _, src := range sources {
		for _, m := range rowRE.FindAllStringSubmatch(src, -1) {
			path := m[3]
			if path == "" {
				var ok bool
				if path, ok = consts[m[4]]; !ok {
					t.Errorf("route table row with path %s: constant not found", m[4])
					continue
				}
			}
			rows++
			r := strings.ToUpper(m[1]) + " " + path
			if !served[r] {
				t.Errorf("route table row %s is not registered by New with everyBackend: embed its Backend interface", r)
			}
		}
	}
	if rows < 50 {
		t.Fatalf("found only %d route table rows in the source; the pattern no longer matches", rows)
	}
}

// servedRoutes walks the router New builds with every optional interface
// and a metrics handler: "METHOD path", HEAD left out.
func servedRoutes(t *testing.T) []string {
	t.Helper()
	h, err := New(everyBackend{}, Config{MetricsHandler: http.NotFoundHandler()})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	err = h.(*server).router.Walk(func(rt *mux.Route, _ *mux.Router, _ []*mux.Route) error {
		path, err := rt.GetPathTemplate()
		if err != nil {
			return err
		}
		methods, err := rt.GetMethods()
		if err != nil {
			return err
		}
		for _, m := range methods {
			if m != http.MethodHead {
				out = append(out, m+" "+path)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) < 50 {
		t.Fatalf("only %d routes served; the walk is broken", len(out))
	}
	slices.Sort(out)
	return slices.Compact(out)
}

var (
	pathVarRE = regexp.MustCompile(`\{[^}]*\}`)
	codeRE    = regexp.MustCompile("`([^`]+)`")
	methodsRE = regexp.MustCompile(`^((?:GET|PUT|POST|PATCH|DELETE|HEAD)(?:/(?:GET|PUT|POST|PATCH|DELETE|HEAD))*)(?:\s+(\S+))?$`)
)

// normalizeRoute drops the names of path variables.
func normalizeRoute(r string) string { return pathVarRE.ReplaceAllString(r, "{}") }

// referenceRoutes reads the routes named in the headings of the
// reference, normalized. A heading's code spans name routes:
// "`GET /ojs/v1/x`", "`GET/PUT/DELETE /ojs/v1/x/{id}`"; after a route,
// "`.../y`" is its path with the last segment replaced by y (same
// methods), and a span of methods alone ("`GET`") reuses its path.
func referenceRoutes(doc string) map[string]bool {
	out := map[string]bool{}
	for line := range strings.SplitSeq(doc, "\n") {
		if !strings.HasPrefix(line, "#") {
			continue
		}
		var methods []string
		var path string
		for _, m := range codeRE.FindAllStringSubmatch(line, -1) {
			span := strings.TrimSpace(m[1])
			switch {
			case strings.HasPrefix(span, ".../") && path != "":
				path = path[:strings.LastIndex(path, "/")] + span[3:]
			default:
				mm := methodsRE.FindStringSubmatch(span)
				if mm == nil {
					continue
				}
				methods = strings.Split(mm[1], "/")
				if mm[2] != "" {
					path = mm[2]
				}
			}
			if path == "" || !strings.HasPrefix(path, "/") {
				continue
			}
			for _, meth := range methods {
				out[normalizeRoute(meth+" "+path)] = true
			}
		}
	}
	return out
}

// TestReferenceHasEveryErrorCode keeps the docs_url of every error
// envelope pointing somewhere (issue 32): each error code of the
// vocabulary (the Code constants of admission/ojs/errors.go, which every
// error jetgate answers is classified into) has its section in
// docs/reference.md, a heading "Error `<code>`" whose GitHub anchor is the
// fragment wire.DocsURL links; and no binding source answers a code
// outside that vocabulary as a string literal.
func TestReferenceHasEveryErrorCode(t *testing.T) {
	codes := errorCodes(t)
	doc, err := os.ReadFile(referencePath)
	if err != nil {
		t.Fatal(err)
	}
	anchors := map[string]bool{}
	for line := range strings.SplitSeq(string(doc), "\n") {
		if strings.HasPrefix(line, "#") {
			anchors[githubAnchor(strings.TrimLeft(line, "# "))] = true
		}
	}
	for _, code := range codes {
		u := wire.DocsURL(code)
		frag, ok := strings.CutPrefix(u, wire.ReferenceURL+"#")
		if !ok || !strings.HasSuffix(wire.ReferenceURL, "/docs/reference.md") {
			t.Errorf("docs_url of %s is %s, not a section of docs/reference.md", code, u)
			continue
		}
		if !anchors[frag] {
			t.Errorf("error code %s: docs_url %s has no section in docs/reference.md (add a heading \"### Error `%s`\")", code, u, code)
		}
	}
	// The envelope carries it, whatever the error.
	env := wire.Classify(&ojs.ValidationError{Field: "x", Rule: "y"}).Envelope("r")
	if env.Error.DocsURL != wire.DocsURL(ojs.CodeInvalidRequest) || env.Error.DocURL != env.Error.DocsURL {
		t.Errorf("envelope docs_url %q doc_url %q, want %q", env.Error.DocsURL, env.Error.DocURL, wire.DocsURL(ojs.CodeInvalidRequest))
	}
	known := map[string]bool{}
	for _, c := range codes {
		known[c] = true
	}
	literal := regexp.MustCompile(`\bCode:\s*"([^"]*)"`)
	for _, dir := range []string{".", "../natsbind", "../admission/ojs/wire", "dashboard"} {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range literal.FindAllStringSubmatch(string(b), -1) {
				if !known[m[1]] {
					t.Errorf("%s answers error code %q, which is not an ojs.Code constant (and has no reference section)", f, m[1])
				}
			}
		}
	}
}

// errorCodes reads the values of the Code constants of admission/ojs.
func errorCodes(t *testing.T) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "../admission/ojs/errors.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var codes []string
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, spec := range g.Specs {
			vs := spec.(*ast.ValueSpec)
			for i, name := range vs.Names {
				if !strings.HasPrefix(name.Name, "Code") || i >= len(vs.Values) {
					continue
				}
				if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
					v, err := strconv.Unquote(lit.Value)
					if err != nil {
						t.Fatal(err)
					}
					codes = append(codes, v)
				}
			}
		}
	}
	if len(codes) < 12 {
		t.Fatalf("found only %d Code constants in admission/ojs/errors.go; the reading is broken", len(codes))
	}
	return codes
}

// githubAnchor is the anchor GitHub gives a heading: lower case, spaces as
// hyphens, every character but letters, digits, '-' and '_' dropped.
func githubAnchor(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}
