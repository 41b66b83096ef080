package client

import (
	"context"
	"fmt"
)

// send reports an outcome: by its own request over HTTP, through the
// batcher over NATS.
func (w *Worker) send(r report) {
	if !w.c.t.nats() {
		w.reportOne(r)
		return
	}
	select {
	case w.reports <- r:
	case <-w.ctx.Done():
		w.log.Warn("worker stopped before the outcome of a job was sent", "job", r.job.ID)
	}
}

func (w *Worker) reportOne(r report) {
	var err error
	ctx := jobTrace(w.ctx, r.job) // the ack continues the job's trace
	if r.ack != nil {
		_, err = w.c.AckJob(ctx, *r.ack)
	} else {
		_, err = w.c.NackJob(ctx, *r.nack)
	}
	w.reported(r, err)
}

func (w *Worker) reported(r report, err error) {
	if err != nil && !IsStatus(err, 409) {
		w.log.Warn("job outcome not recorded", "job", r.job.ID, "ack", r.ack != nil, "error", err)
	}
	if w.cfg.OnReported != nil {
		w.cfg.OnReported(r.job, r.ack != nil, err)
	}
}

// batcher sends the queued outcomes, as many per request as are waiting
// (up to MaxAckBatch), until the worker stops.
func (w *Worker) batcher() {
	defer w.batchers.Done()
	for {
		var first report
		select {
		case first = <-w.reports:
		case <-w.repQuit:
			for {
				select {
				case r := <-w.reports:
					w.flush([]report{r})
				default:
					return
				}
			}
		}
		batch := []report{first}
	more:
		for len(batch) < w.cfg.MaxAckBatch {
			select {
			case r := <-w.reports:
				batch = append(batch, r)
			default:
				break more
			}
		}
		w.flush(batch)
	}
}

// flush sends one ackbatch and one nackbatch for rs.
func (w *Worker) flush(rs []report) {
	var acks []Ack
	var nacks []Nack
	var ackR, nackR []report
	for _, r := range rs {
		if r.ack != nil {
			acks, ackR = append(acks, *r.ack), append(ackR, r)
		} else {
			nacks, nackR = append(nacks, *r.nack), append(nackR, r)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), w.c.cfg.Timeout)
	defer cancel()
	if len(acks) > 0 {
		res, err := w.c.AckBatch(ctx, acks)
		w.batchDone(ackR, res, err)
	}
	if len(nacks) > 0 {
		res, err := w.c.NackBatch(ctx, nacks)
		w.batchDone(nackR, res, err)
	}
}

func (w *Worker) batchDone(rs []report, res []Result, err error) {
	for i, r := range rs {
		e := err
		if e == nil && i < len(res) && res[i].Err != nil {
			e = res[i].Err
		} else if e == nil && i >= len(res) {
			e = fmt.Errorf("batch answer has %d results for %d items", len(res), len(rs))
		}
		w.reported(r, e)
	}
}
