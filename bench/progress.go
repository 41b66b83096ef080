package bench

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"
)

// IsTerminal reports whether w is a terminal (a character device).
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// Bar is the Progress of the command: on a terminal, one live bar per
// scenario redrawn in place with \r; elsewhere, one plain line per run.
type Bar struct {
	w    io.Writer
	live bool

	mu      sync.Mutex
	name    string
	runs    int
	steps   int
	each    time.Duration
	began   time.Time
	stepped time.Time
	label   string

	stop chan struct{}
	done chan struct{}
}

// NewBar draws progress on w, live when live is set.
func NewBar(w io.Writer, live bool) *Bar { return &Bar{w: w, live: live} }

// Begin implements Progress.
func (b *Bar) Begin(scenario string, runs int, each time.Duration) {
	b.mu.Lock()
	b.name, b.runs, b.steps, b.each, b.began = scenario, runs, 0, each, time.Now()
	b.mu.Unlock()
	if !b.live {
		fmt.Fprintf(b.w, "%s: %d runs\n", scenario, runs)
		return
	}
	b.stop, b.done = make(chan struct{}), make(chan struct{})
	go b.redraw(b.stop, b.done)
}

func (b *Bar) redraw(stop, done chan struct{}) {
	defer close(done)
	tk := time.NewTicker(200 * time.Millisecond)
	defer tk.Stop()
	for {
		b.draw()
		select {
		case <-tk.C:
		case <-stop:
			return
		}
	}
}

// draw renders the bar: finished runs plus the running one's share of
// its expected time.
func (b *Bar) draw() {
	b.mu.Lock()
	defer b.mu.Unlock()
	frac := 0.0
	if b.runs > 0 && b.steps > 0 {
		cur := min(float64(time.Since(b.stepped))/float64(max(b.each, time.Millisecond)), 0.95)
		frac = min((float64(b.steps-1)+cur)/float64(b.runs), 1)
	}
	const width = 30
	full := int(frac * width)
	label := b.label
	if r := []rune(label); len(r) > 50 {
		label = string(r[:47]) + "..."
	}
	fmt.Fprintf(b.w, "\r\033[K%-18s [%s%s] %3.0f%% %s", b.name, strings.Repeat("#", full), strings.Repeat(".", width-full), frac*100, label)
}

// Step implements Progress.
func (b *Bar) Step(label string) {
	b.mu.Lock()
	b.steps++
	b.label, b.stepped = label, time.Now()
	steps, runs, name := b.steps, b.runs, b.name
	b.mu.Unlock()
	if !b.live {
		fmt.Fprintf(b.w, "%s [%d/%d] %s\n", name, steps, runs, label)
	}
}

// End implements Progress.
func (b *Bar) End(err error) {
	if b.live {
		close(b.stop)
		<-b.done
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	took := time.Since(b.began).Round(100 * time.Millisecond)
	status := "done"
	if err != nil {
		status = "failed: " + err.Error()
	}
	if b.live {
		fmt.Fprintf(b.w, "\r\033[K%-18s [%s] %s in %s\n", b.name, strings.Repeat("#", 30), status, took)
		return
	}
	fmt.Fprintf(b.w, "%s: %s in %s\n", b.name, status, took)
}
