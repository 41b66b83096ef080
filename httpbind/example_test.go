package httpbind_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"

	"github.com/jetgate/jetgate/admission/ojs"
	"github.com/jetgate/jetgate/httpbind"
)

// healthy is a Backend that only answers health checks.
type healthy struct{ httpbind.Backend }

func (healthy) Health(context.Context) ojs.Health { return ojs.Health{Status: "ok"} }

func ExampleNew() {
	h, err := httpbind.New(healthy{}, httpbind.Config{ServerVersion: "1.0.0", ConformanceLevel: 1})
	if err != nil {
		panic(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()

	resp, err := http.Get(srv.URL + "/ojs/v1/health")
	if err != nil {
		panic(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Println(resp.StatusCode, resp.Header.Get("Content-Type"), resp.Header.Get("OJS-Version"))
	fmt.Print(string(body))
	// Output:
	// 200 application/openjobspec+json 1.0
	// {"status":"ok","version":"1.0.0","uptime_seconds":0,"backend":{"type":"","status":"","latency_ms":0}}
}
