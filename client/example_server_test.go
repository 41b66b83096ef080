package client_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/jetgate/jetgate/cmd/jetgate/app"
)

// exampleServer starts a jetgate (embedded NATS, HTTP on free ports) for
// a runnable example; stop shuts it down and removes its data.
func exampleServer() (srv *app.Server, stop func()) {
	dir, err := os.MkdirTemp("", "jetgate-example-")
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	srv, err = app.Start(ctx, app.Config{DataDir: dir, HTTPAddr: "127.0.0.1:0", NatsAddr: "127.0.0.1:0"},
		slog.New(slog.DiscardHandler))
	if err != nil {
		panic(err)
	}
	return srv, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		_ = os.RemoveAll(dir)
	}
}

// putQueueBound sets a queue's max_depth over the admin API.
func putQueueBound(base, queue string, depth int) error {
	body := fmt.Sprintf(`{"backpressure":{"max_depth":%d,"strategy":"reject"}}`, depth)
	req, err := http.NewRequest(http.MethodPut, base+"/ojs/v1/admin/queues/"+queue+"/config", strings.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(res.Body)
		return fmt.Errorf("queue config: %d %s", res.StatusCode, b)
	}
	return nil
}
