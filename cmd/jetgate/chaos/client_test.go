package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// api sends requests to the jetgate processes, round robin over the ones
// not known to be down, as a load balancer would.
type api struct {
	bases  []string
	client *http.Client
	next   atomic.Uint64

	mu   sync.Mutex
	down map[int]bool
}

func newAPI(bases []string) *api {
	tr := &http.Transport{MaxIdleConnsPerHost: 64, IdleConnTimeout: 30 * time.Second}
	return &api{bases: bases, client: &http.Client{Transport: tr, Timeout: 20 * time.Second}, down: map[int]bool{}}
}

func (a *api) setDown(i int, down bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.down[i] = down
}

func (a *api) pick() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	for range a.bases {
		i := int(a.next.Add(1) % uint64(len(a.bases)))
		if !a.down[i] {
			return a.bases[i]
		}
	}
	return a.bases[int(a.next.Add(1)%uint64(len(a.bases)))]
}

// reply is an HTTP answer; err is set when there was none (connection
// refused or reset, timeout, cancelled).
type reply struct {
	status int
	body   []byte
	err    error
}

// unclear reports whether the request may or may not have taken effect: no
// answer, or a 5xx (a 503 at the request deadline may still complete).
func (r reply) unclear() bool {
	return r.err != nil || r.status >= 500
}

func (r reply) String() string {
	if r.err != nil {
		return r.err.Error()
	}
	return fmt.Sprintf("%d %s", r.status, bytes.TrimSpace(r.body))
}

func (a *api) do(ctx context.Context, method, path string, body any) reply {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return reply{err: err}
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, a.pick()+path, rd)
	if err != nil {
		return reply{err: err}
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := a.client.Do(req)
	if err != nil {
		return reply{err: err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return reply{err: err}
	}
	return reply{status: resp.StatusCode, body: b}
}

// errorCode is the OJS error envelope's code, "" when there is none.
func (r reply) errorCode() string {
	code, _ := r.envelope()
	return code
}

// retryable is the OJS error envelope's retryable flag.
func (r reply) retryable() bool {
	_, retry := r.envelope()
	return retry
}

func (r reply) envelope() (code string, retryable bool) {
	var env struct {
		Error struct {
			Code      string `json:"code"`
			Retryable bool   `json:"retryable"`
		} `json:"error"`
	}
	_ = json.Unmarshal(r.body, &env)
	return env.Error.Code, env.Error.Retryable
}

// sleepCtx waits d or until ctx ends; false when ctx ended.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
