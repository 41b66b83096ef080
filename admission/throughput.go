package admission

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetgate/jetgate/admission/ojs"
	"github.com/jetgate/jetgate/jetstream/jobstore"
	"github.com/jetgate/jetgate/jetstream/topology"
)

// throughputWindow is the span GET /ojs/v1/admin/stats's throughput counts.
const throughputWindow = time.Minute

// Throughput is what every queue did over the last minute (issue 32: the
// throughput of GET /ojs/v1/admin/stats, ojs-admin-api.md 10.1), counted
// from what is already counted: the activity samples each process writes
// to OJS_STATS once a second (stats.go), plus this process's samples not
// flushed yet. It reads the samples of the last minute of every queue
// with one ordered consumer: at most one sample per second per process
// and queue that had activity, whatever the number of jobs; no job and no
// record is read.
func (s *Service) Throughput(ctx context.Context) (ojs.Throughput, error) {
	var sum statSample
	err := s.stats.consistent(func() error {
		var err error
		if sum, err = s.lastMinuteSamples(ctx); err != nil {
			return err
		}
		add(&sum, s.stats.pendingAll())
		return nil
	})
	if err != nil {
		return ojs.Throughput{}, err
	}
	per := throughputWindow.Minutes()
	return ojs.Throughput{
		ProcessedPerMinute: float64(sum.Completed+sum.Failed) / per,
		CompletedPerMinute: float64(sum.Completed) / per,
		FailedPerMinute:    float64(sum.Failed) / per,
	}, nil
}

// lastMinuteSamples sums the samples of every queue stored within the
// last minute.
func (s *Service) lastMinuteSamples(ctx context.Context) (statSample, error) {
	var sum statSample
	err := s.readSamples(ctx, topology.StatSubjects, s.now().Add(-throughputWindow), func(smp statSample, _ time.Time) {
		add(&sum, smp)
	})
	if err != nil {
		return sum, fmt.Errorf("throughput: %w", err)
	}
	return sum, nil
}

// readSamples hands visit every activity sample stored on subject (a
// filter) since since, with the time it was stored, read by one ordered
// consumer: at most one sample per second per process and queue that had
// activity, whatever the number of jobs.
func (s *Service) readSamples(ctx context.Context, subject string, since time.Time, visit func(statSample, time.Time)) error {
	cons, err := s.js.OrderedConsumer(ctx, topology.StatStream, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{subject},
		DeliverPolicy:  jetstream.DeliverByStartTimePolicy,
		OptStartTime:   &since,
		// Gone soon after this read, not after nats.go's default of five
		// minutes: a dashboard asks every few seconds.
		InactiveThreshold: 10 * time.Second,
	})
	if err != nil {
		return jobstore.Unavailable(err)
	}
	for {
		// No wait: the samples of the window are stored already, and an
		// empty window answers at once.
		batch, err := cons.FetchNoWait(500)
		if err != nil {
			return jobstore.Unavailable(err)
		}
		n, pending := 0, uint64(0)
		for m := range batch.Messages() {
			n++
			md, err := m.Metadata()
			if err != nil {
				continue
			}
			pending = md.NumPending
			var smp statSample
			if json.Unmarshal(m.Data(), &smp) == nil {
				visit(smp, md.Timestamp)
			}
		}
		if err := batch.Error(); err != nil && n == 0 {
			return jobstore.Unavailable(err)
		}
		if n == 0 || pending == 0 {
			return nil
		}
	}
}

// pendingAll is this process's unflushed samples of every queue, summed.
func (a *statsAgg) pendingAll() statSample {
	a.mu.Lock()
	defer a.mu.Unlock()
	var sum statSample
	for _, p := range a.samples {
		add(&sum, *p)
	}
	return sum
}
