// Package kvlimits will keep the state of the rate limiting extension
// (spec/ojs-rate-limiting.md) in the KV bucket OJS_LIMITS
// (topology.LimitsBucket). Today it holds no code: rate limiting is not
// implemented yet. The bucket already exists (topology.Ensure creates it,
// empty) so that its name and shape are settled before anything writes to
// it; nothing in jetgate reads or writes it yet, and the manifest does not
// declare the extension.
//
// What it will own, one KV entry per limit key (key = topology.Token of the
// limit key, so "tenant:acme" or "a.b" round-trip and can never inject a
// subject wildcard), each readable as JSON with `nats kv get OJS_LIMITS`:
//   - the policy of the key: concurrency, window and throttle settings;
//   - the concurrency lease set: the ids of the jobs holding a slot, never a
//     bare counter, so a slot held by a job that is no longer active can be
//     found and reclaimed and counts cannot drift;
//   - window state (starts in the current window) and the throttle's next
//     allowed start;
//   - overrides and the dynamic rate_limit_until.
//
// Every change will be one compare-and-swap on the entry's revision; the
// CAS is the fence between jetgate processes. Within a process, acquires
// and releases of one hot key may be gathered and written as one CAS, which
// changes how many writes happen, never who wins.
//
// It must never:
//   - decide anything: whether a job may start, in what order waiters are
//     released and what happens to a limited job belong to package
//     admission, which calls this package;
//   - read or write job records, ready messages or timers (package
//     jetstream/jobstore owns those);
//   - keep limit state anywhere but OJS_LIMITS: in-memory copies are caches
//     and are never trusted for a decision without the CAS;
//   - know about HTTP.
package kvlimits
