// Package admin is the operator API's view of jobs and queues
// (ojs-admin-api.md, ojs-dead-letter.md 10.1): listings, counts and bulk
// operations. It decides nothing about a job's life: every change it makes
// is one of admission's own transitions (Cancel, RetryDeadLetter,
// DeleteJob), each its own compare-and-swap, met through the narrow
// interface Service; it reads job records and ready messages through
// Records (jetstream/jobstore).
//
// It keeps no index and writes nothing on any job's path, so a listing
// costs no stored write per job. Instead:
//
//   - counts (stats, queue counts, pagination totals) come from the
//     queue counts admission already keeps (its StateCounts: the ready
//     stream's level consumers and the counters of stream OJS_COUNTS;
//     admission/stats.go): a batched direct get and a consumer info per
//     priority level per queue, never a scan;
//   - available jobs are listed from the ready stream OJS_READY, on the
//     queue's subjects, in the order they became ready; each ready message
//     is checked against the job's record (same token, still available), or
//     taken as the job itself when it carries one and no record exists;
//   - jobs in other states are listed from the records of bucket OJS_JOBS
//     in the order of their last change (the bucket keeps one message per
//     job).
//
// A listing therefore reads messages from where its cursor stands until
// its page is full: about per_page messages when the filter matches most
// jobs, more when it is selective. Ready messages are read 100 at a time
// and their jobs' records looked up with one batched direct get (one get
// per record where direct gets are off: replicated streams). Records are
// read whatever their queue, so a queue filter on states other than
// available does not narrow what is read; a queue filter on available
// jobs does (the queue's ready subjects only).
//
// Measured over 50,000 available jobs (2 cores, file storage): a page of
// 100 available jobs, 3.9 ms, the same at 80% depth by cursor; a request
// whose filter matches nothing reads its whole budget of 10,000 messages in
// 0.35-0.39 s; stats with one queue, 0.6 ms. None of these depend on the
// number of jobs but the last one: walking all of 1,000,000 jobs with a
// filter that matches none takes 100 requests, about 40 s. Each request reads at most Config.MaxScan messages; a page
// that ran out of budget comes back short with has_more and a cursor to
// go on from. Page numbers are served by skipping matches from the start,
// so they are bounded (Config.MaxOffset); cursors cost the same at any
// depth.
//
// A listing with sort (issue 32: created_at, scheduled_at or priority,
// asc or desc) has no index to follow: it reads every job its filter
// matches within the same Config.MaxScan messages, keeps only their
// listing fields and sorts them, so its total is exact and its pages are
// offsets into that order. One with more to read is refused naming sort,
// saying how to narrow it; an order made from part of the jobs would be
// wrong.
//
// The throughput of AdminStats (issue 32) comes from the activity samples
// admission writes once a second per process and queue (its Throughput:
// one ordered consumer over the last minute of OJS_STATS), not from jobs.
//
// It must never write a job record itself, nor hold state between
// requests: any jetgate process answers any page of any listing.
package admin
