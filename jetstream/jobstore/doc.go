// Package jobstore owns job records and the messages that act on them.
//
// A job record lives in the KV bucket OJS_JOBS under the job id; every
// change is a compare-and-swap on the record's revision (Update), so two
// racing transitions have exactly one winner.
//
// Work that must happen later is a message: a ready message on
// ojs.ready.<queue>.<priority> says "this job may run", a timer (a JetStream
// message schedule on ojs.timer.<kind>.<job>) says "look at this job at that
// time". Each such message carries the record's Token of the transition it
// belongs to, and is published BEFORE the compare-and-swap that makes it
// valid. A crash between the two leaves only a message whose token matches
// no record, which its consumer drops; it can never leave a record without
// its message. That ordering is the whole crash-safety argument, so callers
// must keep it: new token, publish, then CAS.
//
// jobstore never decides anything (that is admission's job) and never knows
// about HTTP.
package jobstore
