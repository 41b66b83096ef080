package kvlimits

import (
	"maps"
	"slices"
	"time"

	"github.com/jetgate/jetgate/admission/ojs"
)

// Scopes of a limit entry.
const (
	ScopeKey   = "key"   // a job-level rate_limit key
	ScopeQueue = "queue" // a queue-level limit (PUT /admin/queues/{q}/rate-limit)
)

// Strategies a denial names (the "strategy" of rate_limit.exceeded).
const (
	StrategyConcurrency = "concurrency"
	StrategyRate        = "rate"
	StrategyThrottle    = "throttle"
	// StrategyDynamic is a hold set by rate_limit_until (RL-R003).
	StrategyDynamic = "dynamic"
	// StrategyQueue is a start refused because older jobs of the key are
	// waiting: they go first (FIFO).
	StrategyQueue = "queue"
)

// ThrottleLead is how long before a throttle's next start its next waiter
// is released, so that the start can happen on time; the claim waits out
// the rest (see admission).
const ThrottleLead = 50 * time.Millisecond

// PromiseTTL bounds how long a waiter promoted back to the ready stream
// keeps its place in the key's capacity if no worker claims it.
const PromiseTTL = 30 * time.Second

// State is one limit entry of OJS_LIMITS, stored as this JSON (readable
// with `nats kv get OJS_LIMITS <entry>`).
type State struct {
	Key   string `json:"key"`
	Scope string `json:"scope"`
	// Policy is the entry's stored policy. For a job key it is the
	// strictest of every policy jobs declared for it (see Tighten); for a
	// queue it is the configured queue-level limit.
	Policy ojs.Limits `json:"policy"`
	// Override replaces the policy's limits it names until it expires.
	Override *Override `json:"override,omitempty"`
	// Until holds every start of the key until then (rate_limit_until).
	Until       *ojs.Time `json:"rate_limit_until,omitempty"`
	UntilReason string    `json:"rate_limit_until_reason,omitempty"`
	// Active is the concurrency lease set: the activations holding a
	// slot, by LeaseKey (job id and activation token), so an activation
	// can only ever take back its own slot.
	Active map[string]Lease `json:"active,omitempty"`
	// Promised are waiters released back to the ready stream whose slot
	// is kept for them until they start or PromiseTTL passes.
	Promised map[string]ojs.Time `json:"promised,omitempty"`
	// PromisedSeq is the wait sequence each promise released (absent in
	// states written before it was kept). A promise that expires takes
	// its sequence out of Released: its ready message may never have
	// landed (a publish that failed, or went unanswered, and was not
	// repeated before the promise ran out), so the waiter, if still
	// stored, is promoted again rather than taken for started.
	PromisedSeq map[string]uint64 `json:"promised_seq,omitempty"`
	// Window counts the starts of the current fixed window.
	Window *WindowState `json:"window,omitempty"`
	// ThrottleNext is the earliest next start allowed by the throttle.
	ThrottleNext *ojs.Time `json:"throttle_next,omitempty"`
	// Released are the wait sequences of the latest waiters released,
	// newest last (at most MaxReleased): a waiter is released once, even
	// when two processes read it before either removed it.
	Released []uint64 `json:"released,omitempty"`
	// Waiting counts jobs parked on this key. It is a hint that keeps new
	// jobs behind older waiters; the wait subjects hold the truth.
	Waiting int `json:"waiting"`
	// Starts counts every start ever admitted, for inspection.
	Starts uint64 `json:"starts"`

	rev uint64
}

// Lease is a concurrency slot held by an active job (by the token of its
// activation, so a lease whose job moved on can be told apart).
type Lease struct {
	JobID string   `json:"job_id"`
	Token string   `json:"token"`
	Since ojs.Time `json:"since"`
}

// LeaseKey is the key of an activation's lease in State.Active.
func LeaseKey(jobID, token string) string { return jobID + ":" + token }

// Override temporarily replaces limits of a key (RL-R004).
type Override struct {
	ojs.Limits
	ExpiresAt *ojs.Time `json:"expires_at,omitempty"`
	SetAt     ojs.Time  `json:"set_at"`
}

// WindowState is the fixed window a count belongs to.
type WindowState struct {
	Start ojs.Time `json:"start"`
	Count int      `json:"count"`
}

// Effective returns the limits in force at now: the policy, with the
// members a live override names replaced by the override's.
func (s *State) Effective(now time.Time) ojs.Limits {
	l := s.Policy
	if o := s.Override; o != nil && (o.ExpiresAt == nil || now.Before(o.ExpiresAt.Time)) {
		if o.Concurrency != nil {
			l.Concurrency = o.Concurrency
		}
		if o.Rate != nil {
			l.Rate = o.Rate
		}
		if o.Throttle != nil {
			l.Throttle = o.Throttle
		}
	}
	return l
}

// Strictest returns the limits that hold when both a and b must hold:
// the smaller concurrency, and per window kind the one allowing fewer
// starts per unit of time (on a tie, the longer period).
func Strictest(a, b ojs.Limits) ojs.Limits {
	out := a
	if b.Concurrency != nil && (a.Concurrency == nil || *b.Concurrency < *a.Concurrency) {
		out.Concurrency = b.Concurrency
	}
	out.Rate = stricterWindow(a.Rate, b.Rate)
	out.Throttle = stricterWindow(a.Throttle, b.Throttle)
	return out
}

func stricterWindow(a, b *ojs.RateWindow) *ojs.RateWindow {
	switch {
	case a == nil:
		return b
	case b == nil:
		return a
	}
	// Starts per nanosecond: a.Limit/a.Period vs b.Limit/b.Period.
	x := float64(a.Limit) / float64(a.Period)
	y := float64(b.Limit) / float64(b.Period)
	if y < x || (y == x && b.Period > a.Period) {
		return b
	}
	return a
}

// Tighten merges a job's declared limits into a job key's stored policy:
// the strictest seen wins, so two jobs declaring different limits for one
// key can never over-admit (the RQ "last registrant wins" edge). Only an
// operator's PUT replaces a policy with a looser one.
func (s *State) Tighten(l ojs.Limits) bool {
	if s.Scope != ScopeKey || l.Empty() {
		return false
	}
	n := Strictest(s.Policy, l)
	if sameLimits(n, s.Policy) {
		return false
	}
	s.Policy = n
	return true
}

func sameLimits(a, b ojs.Limits) bool {
	eqInt := a.Concurrency == b.Concurrency || (a.Concurrency != nil && b.Concurrency != nil && *a.Concurrency == *b.Concurrency)
	eqW := func(x, y *ojs.RateWindow) bool { return x == y || (x != nil && y != nil && *x == *y) }
	return eqInt && eqW(a.Rate, b.Rate) && eqW(a.Throttle, b.Throttle)
}

// Denial says why a start was refused and when it may be allowed.
type Denial struct {
	Strategy string
	Limit    int
	Current  int
	// RetryAt is when the refusing limit is expected to allow a start;
	// zero when it depends on a running job finishing.
	RetryAt time.Time
	Reason  string
}

// Grant is an admitted start; Undo takes it back when the job could not
// be moved to active after all.
type Grant struct {
	JobID    string
	Leased   bool
	Window   time.Time // start of the window counted in, or zero
	Throttle bool
	// token is the activation the lease was taken for.
	token string
	// prevNext is ThrottleNext before this start, restored by Undo when
	// no later start moved it.
	prevNext *ojs.Time
	next     *ojs.Time
}

// Request asks for the start of a job.
type Request struct {
	JobID string
	// Token is the job's activation token, kept with its lease.
	Token string
	// Declared are the limits the job declares (its rate_limit) or, for a
	// queue entry, the queue's configured limits.
	Declared ojs.Limits
	// Promoted says the job was released from the entry's waiters.
	Promoted bool
	// InLine says the job waits its turn when refused (on_limit wait): it
	// does not start ahead of older waiters, and a refusal counts it as a
	// waiter.
	InLine bool
	// Patient is how long the caller will wait itself for a throttle's
	// next start: a refusal by the throttle alone that is due within it
	// does not count the job as a waiter.
	Patient time.Duration
}

// Acquire admits a start if every limit in force allows it at now and
// counts it (lease, window, throttle). The declared limits are merged into
// the stored policy first: tightened into a job key's (Tighten), set as a
// queue's. A job in line that is not promoted waits behind older waiters.
func (s *State) Acquire(r Request, now time.Time) (*Grant, *Denial) {
	s.expire(now)
	if s.Scope == ScopeQueue {
		s.Policy = r.Declared
	} else {
		s.Tighten(r.Declared)
	}
	jobID, token := r.JobID, r.Token
	promise, wasPromised := s.Promised[jobID]
	pseq, hasSeq := s.PromisedSeq[jobID]
	delete(s.Promised, jobID)
	delete(s.PromisedSeq, jobID)
	d := s.decide(r, wasPromised, now)
	if d != nil {
		patient := d.Strategy == StrategyThrottle && d.RetryAt.Sub(now) <= r.Patient
		switch {
		case patient && wasPromised:
			// The caller waits for the start itself: the start stays
			// promised to it meanwhile.
			s.Promised[jobID] = promise
			if hasSeq {
				s.PromisedSeq[jobID] = pseq
			}
		case r.InLine && !patient:
			s.Waiting++
		}
		return nil, d
	}
	l := s.Effective(now)
	var winStart time.Time
	if r := l.Rate; r != nil {
		winStart = now.Truncate(r.Period.D())
	}
	g := &Grant{JobID: jobID}
	if l.Concurrency != nil {
		if s.Active == nil {
			s.Active = map[string]Lease{}
		}
		s.Active[LeaseKey(jobID, token)] = Lease{JobID: jobID, Token: token, Since: ojs.Time{Time: now.UTC()}}
		g.Leased, g.token = true, token
	}
	if l.Rate != nil {
		s.Window.Count++
		g.Window = winStart
	}
	if t := l.Throttle; t != nil {
		g.Throttle, g.prevNext = true, s.ThrottleNext
		// Stored times keep milliseconds (ojs.Time): round up, so the
		// stored next start is never earlier than the exact one.
		s.ThrottleNext = ojs.NewTime(ceilMilli(now.Add(t.Interval())))
		g.next = s.ThrottleNext
	}
	s.Starts++
	return g, nil
}

// decide returns why a start is refused at now, or nil.
func (s *State) decide(r Request, wasPromised bool, now time.Time) *Denial {
	if s.Until != nil && now.Before(s.Until.Time) {
		return &Denial{Strategy: StrategyDynamic, RetryAt: s.Until.Time, Reason: s.UntilReason}
	}
	l := s.Effective(now)
	if r.InLine && !r.Promoted && !wasPromised && s.Waiting > 0 {
		return &Denial{Strategy: StrategyQueue, Current: s.Waiting, Reason: "older jobs of the key are waiting"}
	}
	if c := l.Concurrency; c != nil {
		if used := len(s.Active) + len(s.Promised); used >= *c {
			return &Denial{Strategy: StrategyConcurrency, Limit: *c, Current: len(s.Active)}
		}
	}
	if w := l.Rate; w != nil {
		winStart := now.Truncate(w.Period.D())
		if s.Window != nil && winStart.Before(s.Window.Start.Time) {
			// Another process already counted a start in a later window
			// (its clock read came later): this window is closed.
			return &Denial{Strategy: StrategyRate, Limit: w.Limit, Current: w.Limit, RetryAt: s.Window.Start.Time}
		}
		if s.Window == nil || !s.Window.Start.Equal(winStart) {
			s.Window = &WindowState{Start: ojs.Time{Time: winStart.UTC()}}
		}
		// Starts promised to released waiters are theirs (the caller's
		// own promise was taken out above).
		if s.Window.Count+len(s.Promised) >= w.Limit {
			return &Denial{Strategy: StrategyRate, Limit: w.Limit, Current: s.Window.Count, RetryAt: winStart.Add(w.Period.D())}
		}
	}
	if t := l.Throttle; t != nil {
		if s.ThrottleNext != nil && now.Before(s.ThrottleNext.Time) {
			return &Denial{Strategy: StrategyThrottle, Limit: t.Limit, RetryAt: s.ThrottleNext.Time}
		}
		if len(s.Promised) > 0 {
			// The next start is promised to a released waiter; the one
			// after it is due an interval later at the earliest.
			at := now
			if s.ThrottleNext != nil {
				at = later(at, s.ThrottleNext.Time)
			}
			return &Denial{Strategy: StrategyThrottle, Limit: t.Limit, RetryAt: ceilMilli(at.Add(t.Interval()))}
		}
	}
	return nil
}

// Token is the activation the grant's lease was taken for.
func (g *Grant) Token() string { return g.token }

// Undo takes back a grant whose job did not become active. The window
// count and throttle are restored only if no later start built on them;
// otherwise the start stays counted (a lost start, never an extra one).
func (s *State) Undo(g *Grant) {
	if g.Leased {
		delete(s.Active, LeaseKey(g.JobID, g.token))
	}
	if !g.Window.IsZero() && s.Window != nil && s.Window.Start.Equal(g.Window) && s.Window.Count > 0 {
		s.Window.Count--
	}
	if g.Throttle && s.ThrottleNext != nil && g.next != nil && s.ThrottleNext.Equal(g.next.Time) {
		s.ThrottleNext = g.prevNext
	}
	if s.Starts > 0 {
		s.Starts--
	}
}

// Release frees the slot a job held from its activation with token, as
// it leaves active. It reports whether a slot was held.
func (s *State) Release(jobID, token string) bool {
	k := LeaseKey(jobID, token)
	if _, ok := s.Active[k]; !ok {
		return false
	}
	delete(s.Active, k)
	return true
}

// Promotable is how many waiters may be released now (at most limit), and
// when more may be (zero: when a running job finishes, or never). It
// looks at capacity only: whether there are waiters is for the wait
// subjects to tell, the Waiting hint may be behind.
func (s *State) Promotable(now time.Time, limit int) (int, time.Time) {
	s.expire(now)
	if s.Until != nil && now.Before(s.Until.Time) {
		return 0, s.Until.Time
	}
	l := s.Effective(now)
	n := limit
	var next time.Time
	if c := l.Concurrency; c != nil {
		n = min(n, *c-len(s.Active)-len(s.Promised))
	}
	if r := l.Rate; r != nil {
		ws := now.Truncate(r.Period.D())
		used := len(s.Promised)
		if s.Window != nil && s.Window.Start.Equal(ws) {
			used += s.Window.Count
		}
		if free := r.Limit - used; free < n {
			n = free
			if n <= 0 {
				next = ws.Add(r.Period.D())
			}
		}
	}
	if l.Throttle != nil {
		switch {
		case s.ThrottleNext != nil && now.Before(s.ThrottleNext.Time.Add(-ThrottleLead)):
			// Released ThrottleLead early, so the waiter is in a worker's
			// hands when its start is due.
			n, next = 0, later(next, s.ThrottleNext.Time.Add(-ThrottleLead))
		case len(s.Promised) > 0:
			// One start at a time: the promised one goes first.
			n = 0
			next = later(next, now.Add(time.Second))
		default:
			n = min(n, 1)
		}
	}
	n = max(n, 0)
	if o := s.Override; o != nil && o.ExpiresAt != nil && n == 0 && now.Before(o.ExpiresAt.Time) {
		next = earlier(next, o.ExpiresAt.Time)
	}
	return n, next
}

// Revision is the entry revision the state was read at (0: new entry).
func (s *State) Revision() uint64 { return s.rev }

// MaxReleased bounds State.Released.
const MaxReleased = 256

// Promise records a waiter (job id, wait sequence) released to the ready
// stream.
func (s *State) Promise(jobID string, seq uint64, now time.Time) {
	if s.Promised == nil {
		s.Promised = map[string]ojs.Time{}
	}
	s.Promised[jobID] = ojs.Time{Time: now.UTC()}
	if s.PromisedSeq == nil {
		s.PromisedSeq = map[string]uint64{}
	}
	s.PromisedSeq[jobID] = seq
	s.Waiting = max(s.Waiting-1, 0)
	s.Released = append(s.Released, seq)
	if n := len(s.Released); n > MaxReleased {
		s.Released = append(s.Released[:0:0], s.Released[n-MaxReleased:]...)
	}
}

// WasReleased reports whether the waiter stored at seq was released.
func (s *State) WasReleased(seq uint64) bool { return slices.Contains(s.Released, seq) }

// Hold stops every start of the key until t (rate_limit_until). A later
// hold extends it; an earlier one does not shorten it.
func (s *State) Hold(t time.Time, reason string) bool {
	if s.Until != nil && !t.After(s.Until.Time) {
		return false
	}
	s.Until = ojs.NewTime(t)
	s.UntilReason = reason
	return true
}

// expire drops what has run out at now: promises, an override, a hold.
func (s *State) expire(now time.Time) {
	for id, at := range s.Promised {
		if now.Sub(at.Time) > PromiseTTL {
			delete(s.Promised, id)
			if seq, ok := s.PromisedSeq[id]; ok {
				// A new slice: the old one may be shared with a copy.
				s.Released = slices.DeleteFunc(slices.Clone(s.Released), func(r uint64) bool { return r == seq })
				delete(s.PromisedSeq, id)
			}
		}
	}
	for id := range s.PromisedSeq {
		if _, ok := s.Promised[id]; !ok {
			delete(s.PromisedSeq, id)
		}
	}
	if o := s.Override; o != nil && o.ExpiresAt != nil && !now.Before(o.ExpiresAt.Time) {
		s.Override = nil
	}
	if s.Until != nil && !now.Before(s.Until.Time) {
		s.Until, s.UntilReason = nil, ""
	}
}

// Clone returns a copy of s that can be changed without touching s.
func (s *State) Clone() *State {
	c := *s
	c.Active = maps.Clone(s.Active)
	c.Promised = maps.Clone(s.Promised)
	c.PromisedSeq = maps.Clone(s.PromisedSeq)
	c.Released = slices.Clone(s.Released)
	if s.Window != nil {
		w := *s.Window
		c.Window = &w
	}
	if s.Override != nil {
		o := *s.Override
		c.Override = &o
	}
	return &c
}

// ceilMilli rounds t up to a whole millisecond.
func ceilMilli(t time.Time) time.Time {
	if r := t.Truncate(time.Millisecond); !r.Equal(t) {
		return r.Add(time.Millisecond)
	}
	return t
}

func later(a, b time.Time) time.Time {
	if a.IsZero() || b.After(a) {
		return b
	}
	return a
}

func earlier(a, b time.Time) time.Time {
	if a.IsZero() || b.Before(a) {
		return b
	}
	return a
}
