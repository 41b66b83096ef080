package client

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/jetgate/jetgate/admission/ojs"
)

// DefaultPrefix is the subject prefix of the NATS binding.
const DefaultPrefix = "ojs.v1"

// Job is a job as jetgate returns it.
type Job = ojs.Job

// QueueStats is GET /ojs/v1/queues/{queue}/stats.
type QueueStats = ojs.QueueStats

// Config says where and how a Client talks to jetgate. Exactly one of URL
// and Conn is set.
type Config struct {
	// URL is the base URL of jetgate's HTTP binding
	// (e.g. http://127.0.0.1:8080); HTTPClient carries its requests
	// (default: a client of its own).
	URL        string
	HTTPClient *http.Client
	// Conn is a NATS connection to the cluster jetgate serves; Prefix is
	// the subject prefix of its NATS binding (default ojs.v1).
	Conn   *nats.Conn
	Prefix string
	// Token is sent as "Authorization: Bearer <token>" (HTTP header or
	// NATS header).
	Token string
	// Timeout bounds a request whose context has no deadline (default
	// 10 s).
	Timeout time.Duration
	// Retry, Breaker and Pressure are the producer's backpressure
	// handling (ojs-backpressure.md 8).
	Retry    RetryConfig
	Breaker  BreakerConfig
	Pressure PressureConfig
	// Logger receives warnings (default: discarded).
	Logger *slog.Logger
}

// Client talks to jetgate over HTTP or NATS. It is safe for concurrent
// use.
type Client struct {
	t   transport
	cfg Config
	bp  *backpressure
	log *slog.Logger
	// closeIdle closes the idle connections of the HTTP transport the
	// client made itself (nil otherwise).
	closeIdle func()
}

// Close releases what the client holds of its own: the idle connections
// of the HTTP transport it made when Config.HTTPClient was nil. A
// Config.HTTPClient or Config.Conn stays the caller's to close.
func (c *Client) Close() {
	if c.closeIdle != nil {
		c.closeIdle()
	}
}

// New returns a Client for cfg.
func New(cfg Config) (*Client, error) {
	if (cfg.URL == "") == (cfg.Conn == nil) {
		return nil, errors.New("client: set exactly one of Config.URL and Config.Conn")
	}
	cfg.Timeout = cmp.Or(cfg.Timeout, 10*time.Second)
	cfg.Prefix = strings.TrimSuffix(cmp.Or(cfg.Prefix, DefaultPrefix), ".")
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c := &Client{cfg: cfg, log: log, bp: newBackpressure(cfg.Retry, cfg.Breaker, cfg.Pressure)}
	if cfg.URL != "" {
		u, err := url.Parse(cfg.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("client: URL %q is not an http(s) URL", cfg.URL)
		}
		hc := cfg.HTTPClient
		if hc == nil {
			tr := &http.Transport{MaxIdleConnsPerHost: 128, IdleConnTimeout: time.Minute}
			hc, c.closeIdle = &http.Client{Transport: tr}, tr.CloseIdleConnections
		}
		c.t = &httpTransport{base: strings.TrimSuffix(cfg.URL, "/"), hc: hc, token: cfg.Token}
	} else {
		c.t = &natsTransport{nc: cfg.Conn, prefix: cfg.Prefix, token: cfg.Token}
	}
	return c, nil
}

// OverNATS reports whether the client speaks the NATS binding.
func (c *Client) OverNATS() bool { return c.t.nats() }

// call runs r with the default timeout when ctx has none, and decodes a
// successful answer into out (when not nil).
func (c *Client) call(ctx context.Context, r *request, out any) (*response, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.cfg.Timeout)
		defer cancel()
	}
	r.header = injectTrace(ctx, r.header)
	res, err := c.t.do(ctx, r)
	if err != nil {
		return nil, err
	}
	if out != nil && len(res.body) > 0 {
		if err := json.Unmarshal(res.body, out); err != nil {
			return nil, fmt.Errorf("%s: decode answer: %w", r.op, err)
		}
	}
	return res, nil
}

func jsonBody(v any) ([]byte, error) {
	if v == nil {
		return nil, nil
	}
	return json.Marshal(v)
}

// Get returns a job by id.
func (c *Client) Get(ctx context.Context, id string) (*Job, error) {
	var out struct {
		Job *Job `json:"job"`
	}
	_, err := c.call(ctx, &request{op: "jobs.get", method: http.MethodGet, path: "/ojs/v1/jobs/" + url.PathEscape(id),
		fields: []field{{name: "id", value: id}}}, &out)
	if err != nil {
		return nil, err
	}
	if out.Job == nil {
		return nil, fmt.Errorf("get %s: answer without a job", id)
	}
	return out.Job, nil
}

// Cancel cancels a job that has not finished and returns it.
func (c *Client) Cancel(ctx context.Context, id string) (*Job, error) {
	var out struct {
		Job *Job `json:"job"`
	}
	_, err := c.call(ctx, &request{op: "jobs.cancel", method: http.MethodDelete, path: "/ojs/v1/jobs/" + url.PathEscape(id),
		fields: []field{{name: "id", value: id}}}, &out)
	if err != nil {
		return nil, err
	}
	return out.Job, nil
}

// SetPriority changes the priority of a job that has not started
// (PATCH /ojs/v1/jobs/{id}, ojs-priority.md 10.2).
func (c *Client) SetPriority(ctx context.Context, id string, priority int) error {
	body, _ := json.Marshal(map[string]int{"priority": priority})
	_, err := c.call(ctx, &request{op: "jobs.patch", method: http.MethodPatch, path: "/ojs/v1/jobs/" + url.PathEscape(id),
		body: body, fields: []field{{name: "id", value: id}}}, nil)
	return err
}

// QueueStats returns the counts of a queue (and its pressure when it is
// bounded).
func (c *Client) QueueStats(ctx context.Context, queue string) (*QueueStats, error) {
	var out QueueStats
	_, err := c.call(ctx, &request{op: "queues.stats", method: http.MethodGet,
		path:   "/ojs/v1/queues/" + url.PathEscape(queue) + "/stats",
		fields: []field{{name: "queue", value: queue}}}, &out)
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// PauseQueue stops delivery from a queue (enqueues are still accepted).
func (c *Client) PauseQueue(ctx context.Context, queue string) error {
	_, err := c.call(ctx, &request{op: "queues.pause", method: http.MethodPost,
		path: "/ojs/v1/queues/" + url.PathEscape(queue) + "/pause", fields: []field{{name: "queue", value: queue}}}, nil)
	return err
}

// ResumeQueue resumes delivery from a paused queue.
func (c *Client) ResumeQueue(ctx context.Context, queue string) error {
	_, err := c.call(ctx, &request{op: "queues.resume", method: http.MethodPost,
		path: "/ojs/v1/queues/" + url.PathEscape(queue) + "/resume", fields: []field{{name: "queue", value: queue}}}, nil)
	return err
}
