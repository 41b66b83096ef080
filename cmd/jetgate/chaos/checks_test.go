package chaos

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// violation is one broken invariant: which job (or key, or queue), what, when.
type violation struct {
	job  string
	what string
	when time.Time
}

func (v violation) String() string {
	return fmt.Sprintf("%s at %s: %s", v.job, stamp(v.when), v.what)
}

// maxReports caps the violations one check reports for one key or queue, so
// one broken limit does not drown the rest.
const maxReports = 10

// clockSlack is the precision of the times jetgate stores (milliseconds): a
// throttle gap is reported only when it is short by more than this.
const clockSlack = time.Millisecond

func isTerminal(state string) bool {
	return state == "completed" || state == "discarded" || state == "cancelled"
}

// terminalEvent is the event type a job's final state is announced with.
var terminalEvent = map[string]string{
	"completed": "job.completed",
	"discarded": "job.discarded",
	"cancelled": "job.cancelled",
}

// checkJobs checks every job's own history: accepted jobs end terminal,
// each attempt goes to one worker, at most one successful ack, nothing
// handed out after a successful ack, a successful ack means completed, a
// refused job is never handed out.
// Jobs submitted after openBefore may still be running (zero: all may).
func checkJobs(jobs []*jobRec, openBefore time.Time) []violation {
	var out []violation
	for _, j := range jobs {
		name := j.id + " (" + j.kind + ")"
		if j.enqueue == enqRefused && len(j.holds) > 0 {
			out = append(out, violation{name, fmt.Sprintf("refused with 429 at enqueue, yet handed out as attempt %d to %s",
				j.holds[0].attempt, j.holds[0].worker), j.holds[0].fetchRecv})
		}
		if j.enqueue == enqAccepted && !isTerminal(j.final) && j.submitted.Before(openBefore) {
			out = append(out, violation{name, fmt.Sprintf("submitted at %s, accepted at %s, but not terminal after the drain: state %q; attempts seen: %s",
				stamp(j.submitted), stamp(j.acceptedAt), j.final, j.history()), j.finalAt})
		}
		out = append(out, checkAttempts(name, j)...)
		out = append(out, checkAcks(name, j)...)
	}
	return out
}

func checkAttempts(name string, j *jobRec) []violation {
	var out []violation
	byAttempt := map[int][]*hold{}
	for _, h := range j.holds {
		byAttempt[h.attempt] = append(byAttempt[h.attempt], h)
	}
	for attempt, hs := range byAttempt {
		if len(hs) < 2 {
			continue
		}
		var who []string
		for _, h := range hs {
			who = append(who, fmt.Sprintf("%s (fetch %s..%s)", h.worker, stamp(h.fetchSent), stamp(h.fetchRecv)))
		}
		out = append(out, violation{name, fmt.Sprintf("attempt %d handed out %d times: %s",
			attempt, len(hs), strings.Join(who, ", ")), hs[1].fetchRecv})
	}
	return out
}

func checkAcks(name string, j *jobRec) []violation {
	var out []violation
	if len(j.acks) > 1 {
		var who []string
		for _, a := range j.acks {
			who = append(who, fmt.Sprintf("attempt %d by %s answered 200 at %s", a.attempt, a.worker, stamp(a.received)))
		}
		out = append(out, violation{name, "completed twice: " + strings.Join(who, "; "), j.acks[1].received})
	}
	if len(j.acks) > 0 && isTerminal(j.final) && j.final != "completed" {
		out = append(out, violation{name, fmt.Sprintf("ack of attempt %d answered 200 at %s, but the job reads %q",
			j.acks[0].attempt, stamp(j.acks[0].received), j.final), j.finalAt})
	}
	for _, a := range j.acks {
		for _, h := range j.holds {
			if h.fetchSent.After(a.received) {
				out = append(out, violation{name, fmt.Sprintf("handed out again as attempt %d to %s (fetch sent %s) after the ack of attempt %d answered 200 at %s",
					h.attempt, h.worker, stamp(h.fetchSent), a.attempt, stamp(a.received)), h.fetchRecv})
			}
			if h.attempt > a.attempt && h.fetchRecv.Before(a.sent) {
				out = append(out, violation{name, fmt.Sprintf("ack of attempt %d sent %s by %s answered 200, though attempt %d had already been handed to %s at %s",
					a.attempt, stamp(a.sent), a.worker, h.attempt, h.worker, stamp(h.fetchRecv)), a.received})
			}
		}
	}
	return out
}

// checkEvents: at most one terminal event per job, of its final state.
// It returns the violations and the number of terminal jobs with no
// terminal event seen (events are best effort, so that is not one).
func checkEvents(jobs []*jobRec) ([]violation, int) {
	var out []violation
	missing := 0
	for _, j := range jobs {
		if j.enqueue != enqAccepted {
			continue
		}
		n := 0
		var seen []string
		for _, typ := range []string{"job.completed", "job.discarded", "job.cancelled"} {
			if c := j.events[typ]; c > 0 {
				n += c
				seen = append(seen, fmt.Sprintf("%s ×%d", typ, c))
			}
		}
		name := j.id + " (" + j.kind + ")"
		switch {
		case n > 1:
			out = append(out, violation{name, "more than one terminal event: " + strings.Join(seen, ", "), j.finalAt})
		case n == 1 && isTerminal(j.final) && j.events[terminalEvent[j.final]] != 1:
			out = append(out, violation{name, fmt.Sprintf("terminal event %s, but the job reads %q", seen[0], j.final), j.finalAt})
		case n == 0 && isTerminal(j.final):
			missing++
		}
	}
	return out, missing
}

// checkConcurrency: at no instant did more than limit attempts of the key
// certainly hold a slot. An attempt certainly held it from its fetch's
// answer to hold.heldUntil.
func checkConcurrency(key string, limit int, holds []*hold) []violation {
	type edge struct {
		at    time.Time
		delta int
		h     *hold
	}
	var edges []edge
	for _, h := range holds {
		end := h.heldUntil()
		if end.IsZero() || !end.After(h.fetchRecv) {
			continue
		}
		edges = append(edges, edge{h.fetchRecv, +1, h}, edge{end, -1, h})
	}
	sort.Slice(edges, func(a, b int) bool {
		if !edges[a].at.Equal(edges[b].at) {
			return edges[a].at.Before(edges[b].at)
		}
		return edges[a].delta < edges[b].delta // ends first: touching is not overlapping
	})
	var out []violation
	open := map[*hold]bool{}
	for _, e := range edges {
		if e.delta < 0 {
			delete(open, e.h)
			continue
		}
		open[e.h] = true
		if len(open) == limit+1 && len(out) < maxReports {
			var who []string
			for h := range open {
				who = append(who, fmt.Sprintf("%s attempt %d by %s held %s..%s", h.job, h.attempt, h.worker,
					stamp(h.fetchRecv), stamp(h.heldUntil())))
			}
			sort.Strings(who)
			out = append(out, violation{"key " + key, fmt.Sprintf("concurrency limit %d exceeded: %d attempts held a slot at once: %s",
				limit, len(open), strings.Join(who, "; ")), e.at})
		}
	}
	return out
}

// checkWindow: no fixed window (aligned on multiples of period, UTC) counted
// more than limit starts. A start is placed in a window only when its whole
// [fetch sent, answer] interval lies in it.
func checkWindow(key string, limit int, period time.Duration, holds []*hold) []violation {
	byWindow := map[int64][]*hold{}
	for _, h := range holds {
		w := h.fetchSent.UnixNano() / int64(period)
		if h.fetchRecv.UnixNano()/int64(period) != w {
			continue
		}
		byWindow[w] = append(byWindow[w], h)
	}
	var windows []int64
	for w, hs := range byWindow {
		if len(hs) > limit {
			windows = append(windows, w)
		}
	}
	sort.Slice(windows, func(a, b int) bool { return windows[a] < windows[b] })
	var out []violation
	for _, w := range windows {
		if len(out) == maxReports {
			break
		}
		hs := byWindow[w]
		start := time.Unix(0, w*int64(period))
		var who []string
		for _, h := range hs {
			who = append(who, fmt.Sprintf("%s attempt %d (%s..%s)", h.job, h.attempt, stamp(h.fetchSent), stamp(h.fetchRecv)))
		}
		sort.Strings(who)
		out = append(out, violation{"key " + key, fmt.Sprintf("window limit %d per %s exceeded: %d starts in the window from %s: %s",
			limit, period, len(hs), stamp(start), strings.Join(who, "; ")), start})
	}
	return out
}

// checkThrottle: no two starts of the key closer than period/limit. Two
// starts were certainly too close when even the farthest apart they could
// have been (from their fetch intervals) is short of the gap.
func checkThrottle(key string, limit int, period time.Duration, holds []*hold) []violation {
	gap := period / time.Duration(limit)
	hs := append([]*hold(nil), holds...)
	sort.Slice(hs, func(a, b int) bool { return hs[a].fetchSent.Before(hs[b].fetchSent) })
	var out []violation
	for i, a := range hs {
		for _, b := range hs[i+1:] {
			if b.fetchSent.Sub(a.fetchSent) >= gap {
				break
			}
			farthest := max(b.fetchRecv.Sub(a.fetchSent), a.fetchRecv.Sub(b.fetchSent))
			if farthest >= gap-clockSlack || len(out) == maxReports {
				continue
			}
			out = append(out, violation{"key " + key, fmt.Sprintf("throttle %d per %s (one start every %s) exceeded: %s attempt %d (fetch %s..%s) and %s attempt %d (fetch %s..%s) started at most %s apart",
				limit, period, gap, a.job, a.attempt, stamp(a.fetchSent), stamp(a.fetchRecv),
				b.job, b.attempt, stamp(b.fetchSent), stamp(b.fetchRecv), farthest), b.fetchRecv})
		}
	}
	return out
}

// unclearWindow is how long after its send a fetch with no clear answer is
// assumed able to claim a job (the server may finish a claim after the
// client gave up).
const unclearWindow = 30 * time.Second

// checkBound: the queue never certainly held more than bound jobs. A job
// certainly counted against the bound from its 201 until the first fetch
// that could have claimed it was sent: a fetch that handed it out, or a
// fetch of the queue that got no clear answer.
func checkBound(queue string, bound int, jobs []*jobRec, unclear []time.Time) []violation {
	type edge struct {
		at    time.Time
		delta int
	}
	var edges []edge
	for _, j := range jobs {
		if j.queue != queue || j.enqueue != enqAccepted || j.acceptedAt.IsZero() {
			continue
		}
		leave := time.Time{}
		for _, h := range j.holds {
			if leave.IsZero() || h.fetchSent.Before(leave) {
				leave = h.fetchSent
			}
		}
		from := j.acceptedAt.Add(-unclearWindow)
		i := sort.Search(len(unclear), func(i int) bool { return !unclear[i].Before(from) })
		if i < len(unclear) && (leave.IsZero() || unclear[i].Before(leave)) {
			leave = unclear[i]
		}
		if leave.IsZero() || !leave.After(j.acceptedAt) {
			continue
		}
		edges = append(edges, edge{j.acceptedAt, +1}, edge{leave, -1})
	}
	sort.Slice(edges, func(a, b int) bool {
		if !edges[a].at.Equal(edges[b].at) {
			return edges[a].at.Before(edges[b].at)
		}
		return edges[a].delta < edges[b].delta
	})
	var out []violation
	n := 0
	for _, e := range edges {
		n += e.delta
		if e.delta > 0 && n == bound+1 && len(out) < maxReports {
			out = append(out, violation{"queue " + queue, fmt.Sprintf("bound %d exceeded: %d jobs answered 201 and not yet fetched at once",
				bound, n), e.at})
		}
	}
	return out
}

// How close the load came to each limit, for the report: a check of a limit
// the load never reached would prove nothing.

// peakConcurrency is the most attempts of a key certainly holding a slot at
// once.
func peakConcurrency(holds []*hold) int {
	peak := 0
	for _, a := range holds {
		end := a.heldUntil()
		if end.IsZero() || !end.After(a.fetchRecv) {
			continue
		}
		n := 0
		for _, b := range holds {
			bEnd := b.heldUntil()
			if !bEnd.IsZero() && !b.fetchRecv.After(a.fetchRecv) && bEnd.After(a.fetchRecv) {
				n++
			}
		}
		peak = max(peak, n)
	}
	return peak
}

// peakWindow is the most starts certainly in one window.
func peakWindow(holds []*hold, period time.Duration) int {
	count := map[int64]int{}
	peak := 0
	for _, h := range holds {
		w := h.fetchSent.UnixNano() / int64(period)
		if h.fetchRecv.UnixNano()/int64(period) == w {
			count[w]++
			peak = max(peak, count[w])
		}
	}
	return peak
}

// closestStarts is the shortest "farthest apart two successive starts could
// have been": near the throttle's gap when starts came back to back.
func closestStarts(holds []*hold) time.Duration {
	hs := append([]*hold(nil), holds...)
	sort.Slice(hs, func(a, b int) bool { return hs[a].fetchRecv.Before(hs[b].fetchRecv) })
	closest := time.Duration(-1)
	for i := 1; i < len(hs); i++ {
		a, b := hs[i-1], hs[i]
		d := max(b.fetchRecv.Sub(a.fetchSent), a.fetchRecv.Sub(b.fetchSent))
		if closest < 0 || d < closest {
			closest = d
		}
	}
	return closest
}

// history lists the attempts the workers saw, for violation messages.
func (j *jobRec) history() string {
	if len(j.holds) == 0 {
		return "none"
	}
	var parts []string
	for _, h := range j.holds {
		parts = append(parts, fmt.Sprintf("#%d by %s fetched %s..%s, %s at %s", h.attempt, h.worker,
			stamp(h.fetchSent), stamp(h.fetchRecv), h.outcome, stamp(h.endSent)))
	}
	return strings.Join(parts, "; ")
}
