package events_test

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetgate/jetgate/admission/ojs"
	"github.com/jetgate/jetgate/jetstream/events"
)

func Example() {
	dir, _ := os.MkdirTemp("", "events-example")
	defer os.RemoveAll(dir)
	s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: dir, NoLog: true, NoSigs: true})
	if err != nil {
		panic(err)
	}
	s.Start()
	defer func() { s.Shutdown(); s.WaitForShutdown() }()
	if !s.ReadyForConnections(5 * time.Second) {
		panic("server not ready")
	}
	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		panic(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)

	// No event stream: GET /ojs/v1/events reads a capture that starts on
	// the first read (jetgate serve --events-stream keeps a stream instead).
	p, err := events.New(nc, js, events.Config{Source: "ojs://jetgate/example"})
	if err != nil {
		panic(err)
	}
	defer p.Close()
	ctx := context.Background()
	if err := p.Ensure(ctx); err != nil {
		panic(err)
	}
	// A dashboard's first read starts the capture; it lists only events
	// published after it.
	if _, err := p.Recent(ctx, ojs.EventQuery{}); err != nil {
		panic(err)
	}

	// On the job path: fire and forget.
	job := &ojs.Job{ID: "job-1", Type: "email.send", Queue: "email", Priority: 2}
	p.PublishJob(events.TypeJobEnqueued, job, nil)
	p.PublishQueue(events.TypeQueuePaused, "email", "user:ops")

	// For GET /ojs/v1/events: newest first. The capture receives core
	// publishes asynchronously, so wait until both are kept.
	var evs []ojs.Event
	for deadline := time.Now().Add(5 * time.Second); len(evs) < 2 && time.Now().Before(deadline); {
		evs, err = p.Recent(ctx, ojs.EventQuery{Limit: 10})
		if err != nil {
			panic(err)
		}
	}
	for _, ev := range evs {
		fmt.Println(ev.Type, ev.Subject, string(ev.Data))
	}
	// Output:
	// queue.paused email {"queue":"email","paused_by":"user:ops"}
	// job.enqueued job-1 {"job_type":"email.send","queue":"email","priority":2}
}
