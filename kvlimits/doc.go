// Package kvlimits keeps the state of the rate limiting extension
// (spec/ojs-rate-limiting.md) in the KV bucket OJS_LIMITS
// (topology.LimitsBucket), one entry per limit, readable as JSON with
// `nats kv get OJS_LIMITS <entry>`:
//
//   - key.<escaped key> for a job-level rate_limit key, and
//     queue.<escaped queue> for a queue-level limit. Names go through
//     topology.Token, so "tenant:acme" or "a.b" round-trip and can never
//     inject a subject token or wildcard (DESIGN invariant 7).
//   - the stored policy; the override and its expiry; the dynamic hold
//     (rate_limit_until) and its reason;
//   - the concurrency lease set: the ids of the active jobs holding a slot,
//     with the token of the activation, never a bare counter, so a slot held
//     by a job that is no longer active is found and reclaimed and counts
//     cannot drift;
//   - the promises: waiters released to the ready stream whose slot is kept
//     for them (PromiseTTL);
//   - the count of the current window, the throttle's next allowed start,
//     and a hint of how many jobs wait.
//
// The rules, decided here and documented in docs/decisions.md:
//
//   - Concurrency counts active jobs holding a lease. A job declaring
//     concurrency N starts only while fewer than N slots are held or
//     promised. Concurrency 0 pauses the key.
//   - Windows are fixed, aligned on multiples of the period since the zero
//     time (a PT1M window runs from :00 to :00 of each minute): a window
//     never admits more than limit starts. Bursts at a boundary (up to twice
//     the limit across two adjacent windows) are possible; add a throttle
//     when spacing matters.
//   - A throttle allows a start only period/limit after the previous one.
//   - Conflicting policies for one key: the stored policy of a key is the
//     strictest of every policy jobs declared for it, member by member
//     (smaller concurrency, fewer starts per unit of time), so a key can
//     never over-admit because two jobs declare different limits (the RQ
//     "last registrant wins" edge). It only loosens when an operator resets
//     the key (DELETE /ojs/v1/rate-limits/{key}) or overrides it.
//   - An override (PUT /ojs/v1/rate-limits/{key}) replaces the members it
//     names, for every job of the key, until it expires.
//   - A queue-level limit is the queue's configuration; a job of the queue
//     passes it and its own key's limits (queue first).
//   - Times are the jetgate processes' clocks: hosts running jetgate must be
//     synchronised (NTP) for windows and throttles across processes.
//
// Every change is one compare-and-swap on the entry's revision; the CAS is
// the fence between jetgate processes. Within a process, changes of one
// entry are gathered and written as one CAS (Store.Update), which changes
// how many writes happen, never who wins. The decisions themselves are pure
// functions of a State and a time (state.go), tested without a server.
//
// It never:
//   - decides what happens to a job: whether a refused job waits, is
//     rescheduled or dropped, and in what order waiters are released belong
//     to package admission, which calls this package;
//   - reads or writes job records, ready messages, waiters or timers
//     (package jetstream/jobstore owns those);
//   - keeps limit state anywhere but OJS_LIMITS: in-memory copies are caches
//     and are never trusted for a decision without the CAS;
//   - knows about HTTP.
package kvlimits
