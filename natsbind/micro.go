package natsbind

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	"github.com/nats-io/nuid"
)

// microService speaks the NATS services protocol (ADR-32, the one
// nats.go's micro package implements and `nats micro ls|info|stats`
// reads) for the endpoints of Service: it subscribes each endpoint's
// subject in its queue group, answers PING, INFO and STATS on the
// $SRV.<verb>[.<name>[.<id>]] control subjects with micro's own types,
// and takes the numbers of STATS from the Service's counts.
//
// Why not micro.AddService: micro counts a request, its time and whether
// it failed when the endpoint's handler returns, and calls handlers one at
// a time on the subscription's goroutine. natsbind serves every request on
// its own goroutine (a waiting fetch must not hold up an ack), so its
// handler returns before the reply is sent and micro counted every
// request as a success taking no time: `nats micro stats ojs` showed no
// errors after 400 and 404 replies (issue 31). Here a request is counted
// when its reply is sent, with its status and its time.
type microService struct {
	nc      *nats.Conn
	id      string
	cfg     micro.Config // Name, Version, Description, Metadata, QueueGroup
	started time.Time
	// stats returns the counts of an endpoint by name.
	stats func(name string) endpointStats

	mu   sync.Mutex
	eps  []micro.EndpointInfo
	subs []*nats.Subscription // endpoints' and control subjects'
}

// newMicroService validates cfg as micro.AddService does and subscribes
// the control subjects.
func newMicroService(nc *nats.Conn, cfg micro.Config, stats func(string) endpointStats) (*microService, error) {
	if !semver.MatchString(cfg.Version) {
		return nil, fmt.Errorf("service version %q is not a semantic version", cfg.Version)
	}
	m := &microService{nc: nc, id: nuid.Next(), cfg: cfg, started: time.Now().UTC(), stats: stats}
	m.cfg.Metadata = maps.Clone(cfg.Metadata)
	if m.cfg.Metadata == nil {
		m.cfg.Metadata = map[string]string{}
	}
	for verb, answer := range map[micro.Verb]func() any{
		micro.PingVerb:  func() any { return micro.Ping{ServiceIdentity: m.identity(), Type: micro.PingResponseType} },
		micro.InfoVerb:  func() any { return m.info() },
		micro.StatsVerb: func() any { return m.statsReply() },
	} {
		for _, kind := range [][2]string{{"", ""}, {cfg.Name, ""}, {cfg.Name, m.id}} {
			subj, err := micro.ControlSubject(verb, kind[0], kind[1])
			if err != nil {
				m.stop()
				return nil, err
			}
			sub, err := nc.Subscribe(subj, func(msg *nats.Msg) {
				b, err := json.Marshal(answer())
				if err == nil {
					_ = msg.Respond(b)
				}
			})
			if err != nil {
				m.stop()
				return nil, fmt.Errorf("subscribe %s: %w", subj, err)
			}
			m.subs = append(m.subs, sub)
		}
	}
	return m, nil
}

// addEndpoint subscribes subject in the service's queue group; every
// request goes to handle, on the subscription's goroutine.
func (m *microService) addEndpoint(name, subject string, md map[string]string, handle func(*nats.Msg)) error {
	sub, err := m.nc.QueueSubscribe(subject, m.cfg.QueueGroup, handle)
	if err != nil {
		return fmt.Errorf("subscribe %s: %w", subject, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.subs = append(m.subs, sub)
	m.eps = append(m.eps, micro.EndpointInfo{Name: name, Subject: subject,
		QueueGroup: m.cfg.QueueGroup, Metadata: maps.Clone(md)})
	return nil
}

// stop drains every subscription: requests already delivered are still
// handled, no new one arrives.
func (m *microService) stop() error {
	m.mu.Lock()
	subs := m.subs
	m.subs = nil
	m.mu.Unlock()
	var errs []error
	for _, sub := range subs {
		if err := sub.Drain(); err != nil && !errors.Is(err, nats.ErrConnectionClosed) {
			errs = append(errs, fmt.Errorf("drain %s: %w", sub.Subject, err))
		}
	}
	return errors.Join(errs...)
}

func (m *microService) identity() micro.ServiceIdentity {
	return micro.ServiceIdentity{Name: m.cfg.Name, ID: m.id, Version: m.cfg.Version, Metadata: maps.Clone(m.cfg.Metadata)}
}

func (m *microService) info() micro.Info {
	m.mu.Lock()
	defer m.mu.Unlock()
	eps := make([]micro.EndpointInfo, 0, len(m.eps))
	for _, e := range m.eps {
		e.Metadata = maps.Clone(e.Metadata)
		eps = append(eps, e)
	}
	return micro.Info{ServiceIdentity: m.identity(), Type: micro.InfoResponseType,
		Description: m.cfg.Description, Endpoints: eps}
}

// statsReply is STATS: micro's numbers per endpoint (requests answered,
// error replies among them, the last one as "<status>:<code>", time spent
// from arrival to reply) and natsbind's own counts as the endpoint's data.
func (m *microService) statsReply() micro.Stats {
	m.mu.Lock()
	eps := append([]micro.EndpointInfo(nil), m.eps...)
	m.mu.Unlock()
	out := micro.Stats{ServiceIdentity: m.identity(), Type: micro.StatsResponseType, Started: m.started,
		Endpoints: make([]*micro.EndpointStats, 0, len(eps))}
	for _, e := range eps {
		st := m.stats(e.Name)
		es := &micro.EndpointStats{Name: e.Name, Subject: e.Subject, QueueGroup: e.QueueGroup,
			NumRequests: int(st.Requests), NumErrors: int(st.Errors), LastError: st.lastErrorFull,
			ProcessingTime: st.Time}
		if st.Requests > 0 {
			es.AverageProcessingTime = st.Time / time.Duration(st.Requests)
		}
		es.Data, _ = json.Marshal(st)
		out.Endpoints = append(out.Endpoints, es)
	}
	return out
}
