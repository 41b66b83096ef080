package admin

import (
	"cmp"
	"context"
	"errors"
	"time"

	"github.com/jetgate/jetgate/admission/ojs"
	"github.com/jetgate/jetgate/jetstream/jobstore"
)

// Service is what the operator API asks of the admission service: the
// transitions bulk operations apply, and the counters and queue records it
// reports. *admission.Service implements it.
type Service interface {
	Cancel(ctx context.Context, id string) (*ojs.Job, ojs.State, error)
	RetryDeadLetter(ctx context.Context, id string) (*ojs.Job, error)
	DeleteJob(ctx context.Context, id string) error
	ListQueues(ctx context.Context) ([]ojs.QueueInfo, error)
	QueueConfig(ctx context.Context, name string) (*ojs.QueueConfig, error)
	StateCounts(ctx context.Context, queue string) (map[ojs.State]int64, error)
	Health(ctx context.Context) ojs.Health
	Throughput(ctx context.Context) (ojs.Throughput, error)
}

// Workers is the worker registry, counted by the statistics.
// *workers.Registry implements it.
type Workers interface {
	AllWorkers() []ojs.Worker
}

// Records is what the operator API reads from the job store.
// *jobstore.Store implements it.
type Records interface {
	GetMany(ctx context.Context, ids []string) (map[string]*ojs.Job, error)
	ScanReady(ctx context.Context, queue string, from uint64, max int, fn func(jobstore.ReadyEntry) bool) (jobstore.ScanPos, error)
	ScanRecords(ctx context.Context, from uint64, max int, fn func(jobstore.RecordEntry) bool) (jobstore.ScanPos, error)
}

// Config bounds what one request may cost.
type Config struct {
	// MaxScan is how many messages (ready messages and job records) one
	// listing or bulk request reads at most (default 10,000).
	MaxScan int
	// MaxOffset is how many matching jobs a page number may skip
	// ((page-1)*per_page, default 10,000); deeper pages are reached with
	// cursors.
	MaxOffset int
	// MaxBulk is how many jobs one bulk request changes at most (default
	// 1,000).
	MaxBulk int
	// DeadRetention is how long discarded jobs are kept, reported by the
	// dead letter statistics (0: not reported).
	DeadRetention time.Duration
	// Workers, when set, is counted by AdminStats (0 without it).
	Workers Workers
	// Clock tells the time (default time.Now).
	Clock func() time.Time
}

// Page sizes of listings (ojs-admin-api.md 7.1: default 20, max 100).
const (
	DefaultPerPage = 20
	MaxPerPage     = 100
)

func (c Config) withDefaults() Config {
	c.MaxScan = cmp.Or(c.MaxScan, 10_000)
	c.MaxOffset = cmp.Or(c.MaxOffset, 10_000)
	c.MaxBulk = cmp.Or(c.MaxBulk, 1_000)
	if c.Clock == nil {
		c.Clock = time.Now
	}
	return c
}

// Admin serves the operator API's reads and bulk operations.
type Admin struct {
	svc Service
	rec Records
	cfg Config
}

// New returns an Admin over svc and rec.
func New(svc Service, rec Records, cfg Config) (*Admin, error) {
	if svc == nil || rec == nil {
		return nil, errors.New("admin: nil Service or Records")
	}
	cfg = cfg.withDefaults()
	if cfg.MaxScan < 1 || cfg.MaxOffset < 0 || cfg.MaxBulk < 1 {
		return nil, errors.New("admin: MaxScan and MaxBulk must be >= 1, MaxOffset >= 0")
	}
	return &Admin{svc: svc, rec: rec, cfg: cfg}, nil
}

// MaxBulk is the most jobs one bulk request changes.
func (a *Admin) MaxBulk() int { return a.cfg.MaxBulk }
