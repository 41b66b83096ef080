package app_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/jetgate/jetgate/admission/ojs"
	"github.com/jetgate/jetgate/cmd/jetgate/app"
)

// badBodies are request objects that encoding/json reads without a word
// but not as sent, and the field each must be refused under (issue 31
// item 5): a key given twice (the last would win silently), at the top
// and deep inside, and text that is not UTF-8 (it would become U+FFFD),
// as bytes and as half a surrogate pair.
var badBodies = []struct{ body, field string }{
	{`{"zz":1,"zz":2}`, "zz"},
	{`{"a":{"b":[{"c":1},{"c":1,"c":2}]}}`, "a.b[1].c"},
	{"{\"zz\":\"caf\xe9\"}", "zz"},
	{`{"args":["ok","\ud800"]}`, "args[1]"},
}

// Issue 31 item 5: every route of the HTTP API that takes a body (every
// POST, PUT, PATCH and DELETE of docs/reference.md) and every endpoint of
// the NATS API answers 400 invalid_payload naming the field for a key
// given twice and for text that is not UTF-8, and changes nothing.
func TestIssue31BodiesHoldTextAndKeysOnce(t *testing.T) {
	t.Parallel()
	s := startApp(t, app.Config{})
	c := client{t: t, base: s.URL()}
	id := ojs.NewID()
	pathVar := regexp.MustCompile(`\{[^}]*\}`)
	routes := 0
	for _, rt := range referencedRoutes(t) {
		method, tmpl, _ := strings.Cut(rt, " ")
		if method == http.MethodGet || strings.HasSuffix(tmpl, "/stream") {
			continue
		}
		routes++
		path := pathVar.ReplaceAllLiteralString(tmpl, id)
		for _, bb := range badBodies {
			r := rawDo(t, method, s.URL()+path, []byte(bb.body))
			e := obj(r.body["error"])
			if r.status != 400 || e["code"] != ojs.CodeInvalidPayload || obj(e["details"])["field"] != bb.field {
				t.Errorf("%s %s %q: %d %s, want 400 invalid_payload naming %s", method, path, bb.body, r.status, r.raw, bb.field)
			}
		}
	}
	if routes < 25 {
		t.Fatalf("only %d routes with a body read from docs/reference.md", routes)
	}

	nc, err := nats.Connect(s.NatsURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	for _, subj := range s.NatsAPI().Subjects() {
		for _, bb := range badBodies {
			res, err := nc.Request(subj, []byte(bb.body), 10*time.Second)
			if err != nil {
				t.Fatalf("%s: %v", subj, err)
			}
			var env struct {
				Error struct {
					Code    string         `json:"code"`
					Details map[string]any `json:"details"`
				} `json:"error"`
			}
			_ = json.Unmarshal(res.Data, &env)
			if res.Header.Get(micro.ErrorCodeHeader) != "400" || env.Error.Code != ojs.CodeInvalidPayload || env.Error.Details["field"] != bb.field {
				t.Errorf("%s %q: %s %s, want 400 invalid_payload naming %s", subj, bb.body,
					res.Header.Get(micro.ErrorCodeHeader), res.Data, bb.field)
			}
		}
	}
	// Nothing was enqueued by any of them.
	if page := c.must(200, "GET", "/ojs/v1/admin/jobs", nil); len(list(page["items"])) != 0 {
		t.Fatalf("jobs exist after refused requests: %v", page)
	}
}

// rawDo sends body as it is (the client helper marshals, which would
// repair the text) and decodes the answer.
func rawDo(t *testing.T, method, url string, body []byte) resp {
	t.Helper()
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/openjobspec+json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	r := resp{status: res.StatusCode, header: res.Header, raw: string(raw)}
	_ = json.Unmarshal(raw, &r.body)
	return r
}
