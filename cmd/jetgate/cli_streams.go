package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/jsm.go"
	"github.com/nats-io/jsm.go/api"
	"github.com/nats-io/jsm.go/monitor"

	"github.com/jetgate/jetgate/jetstream/topology"
)

// jetgate's streams are named OJS_* and its buckets' streams KV_OJS_*.
const (
	streamPrefix = "OJS_"
	kvPrefix     = "KV_"
)

// streamsReport is what `jetgate streams --json` prints.
type streamsReport struct {
	Streams   []streamRow   `json:"streams"`
	Buckets   []bucketRow   `json:"buckets"`
	Consumers []consumerRow `json:"consumers"`
	Health    healthReport  `json:"health"`

	// offlineConsumers are consumers the server listed as missing or
	// offline ("stream > consumer" -> reason), for the health check.
	offlineConsumers map[string]string
}

type streamRow struct {
	Name      string `json:"name"`
	Storage   string `json:"storage"`
	Retention string `json:"retention"`
	Replicas  int    `json:"replicas"`
	Messages  uint64 `json:"messages"`
	Bytes     uint64 `json:"bytes"`
	Subjects  int    `json:"subjects"`
	Consumers int    `json:"consumers"`
}

type bucketRow struct {
	Bucket   string        `json:"bucket"`
	Stream   string        `json:"stream"`
	Storage  string        `json:"storage"`
	Replicas int           `json:"replicas"`
	Values   uint64        `json:"values"`
	Keys     int           `json:"keys"`
	Bytes    uint64        `json:"bytes"`
	History  int64         `json:"history"`
	TTL      time.Duration `json:"ttl_ns"`
}

type consumerRow struct {
	Stream         string `json:"stream"`
	Name           string `json:"name"`
	Filter         string `json:"filter,omitempty"`
	NumPending     uint64 `json:"num_pending"`
	NumAckPending  int    `json:"num_ack_pending"`
	NumRedelivered int    `json:"num_redelivered"`
	NumWaiting     int    `json:"num_waiting"`
}

type healthReport struct {
	OK     bool          `json:"ok"`
	Checks []healthCheck `json:"checks"`
}

type healthCheck struct {
	Asset    string   `json:"asset"`
	Status   string   `json:"status"` // OK, CRITICAL
	Problems []string `json:"problems,omitempty"`
}

func streamsCommand() command {
	var replicas int
	return single(&leaf{use: "streams", nargs: 0,
		summary: "Reports jetgate's JetStream assets, read directly from JetStream with jsm.go: its streams (messages, bytes, subjects), KV buckets (values, keys, bytes), consumers and their lag (num_pending: not yet delivered; num_ack_pending: delivered, not yet acknowledged), and a health check of every stream jetgate needs (present, online, with a leader and current replicas). Exits non-zero when the health check fails.",
		flags: func(fs *flag.FlagSet) {
			fs.IntVar(&replicas, "replicas", 0, "Replicas every required stream must have (3 for a 3-node deployment; default: each stream's own setting is checked against its peers).")
		},
		run: func(ctx context.Context, c *cliCtx, _ []string) error {
			rep, err := c.streamsReport(ctx, replicas)
			if err != nil {
				return err
			}
			if c.json {
				b, err := json.MarshalIndent(rep, "", "  ")
				if err != nil {
					return err
				}
				fmt.Fprintf(c.out, "%s\n", b)
			} else if err := c.printStreams(rep); err != nil {
				return err
			}
			if !rep.Health.OK {
				return fmt.Errorf("jetgate's JetStream assets are not healthy (see the health section)")
			}
			return nil
		}}, dialNATS)
}

func (c *cliCtx) streamsReport(ctx context.Context, replicas int) (*streamsReport, error) {
	mgr, err := jsm.New(c.nc, jsm.WithTimeout(c.flags.timeout))
	if err != nil {
		return nil, fmt.Errorf("jsm: %w", err)
	}
	streams, missing, offline, err := mgr.Streams(nil)
	if err != nil {
		return nil, fmt.Errorf("list streams: %w", err)
	}
	rep := &streamsReport{Streams: []streamRow{}, Buckets: []bucketRow{}, Consumers: []consumerRow{}, offlineConsumers: map[string]string{}}
	infos := map[string]*api.StreamInfo{}
	for _, s := range streams {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		name := s.Name()
		if !strings.HasPrefix(name, streamPrefix) && !strings.HasPrefix(name, kvPrefix+streamPrefix) {
			continue
		}
		info, err := s.LatestInformation()
		if err != nil {
			return nil, fmt.Errorf("stream %s: %w", name, err)
		}
		infos[name] = info
		rep.add(info)
		if info.State.Consumers > 0 {
			if err := rep.addConsumers(mgr, name); err != nil {
				return nil, err
			}
		}
	}
	rep.Health = checkHealth(infos, missing, offline, replicas)
	names := make([]string, 0, len(rep.offlineConsumers))
	for name := range rep.offlineConsumers {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		rep.Health.OK = false
		rep.Health.Checks = append(rep.Health.Checks, healthCheck{Asset: name, Status: string(monitor.CriticalStatus), Problems: []string{rep.offlineConsumers[name]}})
	}
	return rep, nil
}

func (r *streamsReport) add(info *api.StreamInfo) {
	cfg, st := info.Config, info.State
	if bucket, ok := strings.CutPrefix(cfg.Name, kvPrefix); ok {
		r.Buckets = append(r.Buckets, bucketRow{Bucket: bucket, Stream: cfg.Name, Storage: cfg.Storage.String(),
			Replicas: cfg.Replicas, Values: st.Msgs, Keys: st.NumSubjects, Bytes: st.Bytes,
			History: cfg.MaxMsgsPer, TTL: cfg.MaxAge})
		return
	}
	r.Streams = append(r.Streams, streamRow{Name: cfg.Name, Storage: cfg.Storage.String(), Retention: cfg.Retention.String(),
		Replicas: cfg.Replicas, Messages: st.Msgs, Bytes: st.Bytes, Subjects: st.NumSubjects, Consumers: st.Consumers})
}

func (r *streamsReport) addConsumers(mgr *jsm.Manager, stream string) error {
	cons, missing, offline, err := mgr.Consumers(stream)
	if err != nil {
		return fmt.Errorf("consumers of %s: %w", stream, err)
	}
	for _, name := range missing {
		r.offlineConsumers[stream+" > "+name] = "missing from the server's listing"
	}
	for name, why := range offline {
		r.offlineConsumers[stream+" > "+name] = "offline: " + why
	}
	for _, con := range cons {
		st, err := con.LatestState()
		if err != nil {
			return fmt.Errorf("consumer %s > %s: %w", stream, con.Name(), err)
		}
		filter := st.Config.FilterSubject
		if filter == "" {
			filter = strings.Join(st.Config.FilterSubjects, ",")
		}
		r.Consumers = append(r.Consumers, consumerRow{Stream: stream, Name: con.Name(), Filter: filter,
			NumPending: st.NumPending, NumAckPending: st.NumAckPending, NumRedelivered: st.NumRedelivered, NumWaiting: st.NumWaiting})
	}
	return nil
}

// checkHealth checks every stream of topology.Required(): present, not
// reported missing or offline by the server, and healthy by jsm.go's
// stream check (monitor.CheckStreamInfoHealth: a leader, the expected
// peers, none offline). streamsReport adds a failed check for each
// consumer of jetgate's streams that the server reports offline.
func checkHealth(infos map[string]*api.StreamInfo, missing []string, offline map[string]string, replicas int) healthReport {
	h := healthReport{OK: true}
	for _, name := range topology.Required() {
		chk := healthCheck{Asset: name, Status: string(monitor.OKStatus)}
		info, ok := infos[name]
		switch {
		case offline[name] != "":
			chk.Problems = append(chk.Problems, "offline: "+offline[name])
		case slices.Contains(missing, name):
			chk.Problems = append(chk.Problems, "missing from the server's listing")
		case !ok:
			chk.Problems = append(chk.Problems, "does not exist (jetgate serve creates it at start)")
		default:
			var res monitor.Result
			peers := replicas
			if peers == 0 && info.Config.Replicas > 1 {
				peers = info.Config.Replicas
			}
			monitor.CheckStreamInfoHealth(info, &res, monitor.CheckStreamHealthOptions{StreamName: name, ClusterExpectedPeers: peers}, discardLog{})
			chk.Problems = append(chk.Problems, res.Criticals...)
			chk.Problems = append(chk.Problems, res.Warnings...)
		}
		if len(chk.Problems) > 0 {
			chk.Status = string(monitor.CriticalStatus)
			h.OK = false
		}
		h.Checks = append(h.Checks, chk)
	}
	return h
}

// discardLog is the api.Logger jsm.go's checks log to: their findings
// come back in the monitor.Result.
type discardLog struct{}

func (discardLog) Tracef(string, ...any) {}
func (discardLog) Debugf(string, ...any) {}
func (discardLog) Infof(string, ...any)  {}
func (discardLog) Warnf(string, ...any)  {}
func (discardLog) Errorf(string, ...any) {}

func (c *cliCtx) printStreams(r *streamsReport) error {
	fmt.Fprintln(c.out, "Streams:")
	rows := [][]string{}
	for _, s := range r.Streams {
		rows = append(rows, []string{s.Name, s.Storage, s.Retention, itoa(s.Replicas), utoa(s.Messages), bytesHuman(s.Bytes), itoa(s.Subjects), itoa(s.Consumers)})
	}
	if err := c.table("  NAME\tSTORAGE\tRETENTION\tREPLICAS\tMESSAGES\tBYTES\tSUBJECTS\tCONSUMERS", indent(rows)); err != nil {
		return err
	}
	fmt.Fprintln(c.out, "\nKV buckets:")
	rows = rows[:0]
	for _, b := range r.Buckets {
		ttl := "-"
		if b.TTL > 0 {
			ttl = b.TTL.String()
		}
		rows = append(rows, []string{b.Bucket, b.Storage, itoa(b.Replicas), utoa(b.Values), itoa(b.Keys), bytesHuman(b.Bytes), strconv.FormatInt(b.History, 10), ttl})
	}
	if err := c.table("  BUCKET\tSTORAGE\tREPLICAS\tVALUES\tKEYS\tBYTES\tHISTORY\tTTL", indent(rows)); err != nil {
		return err
	}
	fmt.Fprintln(c.out, "\nConsumers:")
	rows = rows[:0]
	for _, k := range r.Consumers {
		rows = append(rows, []string{k.Stream, k.Name, k.Filter, utoa(k.NumPending), itoa(k.NumAckPending), itoa(k.NumRedelivered), itoa(k.NumWaiting)})
	}
	if err := c.table("  STREAM\tCONSUMER\tFILTER\tNUM_PENDING\tNUM_ACK_PENDING\tREDELIVERED\tWAITING", indent(rows)); err != nil {
		return err
	}
	fmt.Fprintln(c.out, "\nHealth (streams jetgate requires):")
	rows = rows[:0]
	for _, h := range r.Health.Checks {
		rows = append(rows, []string{h.Asset, h.Status, strings.Join(h.Problems, "; ")})
	}
	return c.table("  ASSET\tSTATUS\tPROBLEMS", indent(rows))
}

func indent(rows [][]string) [][]string {
	out := make([][]string, len(rows))
	for i, r := range rows {
		out[i] = append([]string{"  " + r[0]}, r[1:]...)
	}
	return out
}

func itoa(n int) string    { return strconv.Itoa(n) }
func utoa(n uint64) string { return strconv.FormatUint(n, 10) }

// bytesHuman renders a byte count with a binary unit (1.5 KiB).
func bytesHuman(n uint64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := uint64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
