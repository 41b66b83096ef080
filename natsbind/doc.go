// Package natsbind is the OJS NATS binding: every operation of the HTTP
// binding (httpbind) as an endpoint of one nats.go micro service named
// "ojs", so `nats micro ls`, `nats micro info ojs` and `nats micro stats
// ojs` show it and `nats req ojs.v1.jobs.enqueue '{...}'` enqueues a job.
//
// It is a thin adapter, as httpbind is: it reads fields out of NATS
// messages and writes replies; every request rule (admission/ojs/wire
// decoders) and every error mapping (wire.Classify) is shared with
// httpbind, and every decision is the Backend's (the admission service).
// It never touches JetStream state itself.
//
// # Subjects
//
// Subjects are "<prefix>.<area>.<op>", prefix "ojs.v1" by default
// (Config.Prefix). Request bodies are exactly the HTTP bodies; where HTTP
// puts a value in the path or query, the body carries it as a field of the
// same name ("id", "queue", "key", "limit", ...). A success reply is the
// HTTP success body. An error reply carries micro's error headers,
// Nats-Service-Error-Code = the HTTP status ("400", "404", "409", "422",
// "429", "503", ...) and Nats-Service-Error = the OJS error code
// ("invalid_request", ...), with the OJS error envelope as the body;
// headers HTTP sends with it (Retry-After, X-OJS-Queue-*,
// WWW-Authenticate) come along as NATS headers. Every reply carries
// X-Request-Id (the client's, when safe, or a new one) and OJS-Version.
//
//	health               GET /ojs/v1/health            {}
//	jobs.enqueue         POST /ojs/v1/jobs             job envelope
//	jobs.batch           POST /ojs/v1/jobs/batch       {"jobs":[...]}
//	jobs.get             GET /ojs/v1/jobs/{id}         {"id"}
//	jobs.cancel          DELETE /ojs/v1/jobs/{id}      {"id"}
//	jobs.activate        POST /ojs/v1/jobs/{id}/activate {"id"}
//	jobs.patch           PATCH /ojs/v1/jobs/{id}       {"id", "priority"?, timeouts?}
//	jobs.progress        GET /ojs/v1/jobs/{id}/progress {"id"}
//	workers.fetch        POST /ojs/v1/workers/fetch    + "wait_ms" (0..30000)
//	workers.ack          POST /ojs/v1/workers/ack
//	workers.nack         POST /ojs/v1/workers/nack
//	workers.ackbatch     (NATS only) {"acks":[<ack body>...]} (1..1000)
//	workers.nackbatch    (NATS only) {"nacks":[<nack body>...]} (1..1000)
//	workers.heartbeat    POST /ojs/v1/workers/heartbeat
//	workers.progress     PUT /ojs/v1/jobs/{id}/progress {"id", ...}
//	queues.list          GET /ojs/v1/queues            {"limit"?, "offset"?, "cursor"?}
//	queues.stats         GET /ojs/v1/queues/{name}/stats {"queue"}
//	queues.pause         POST /ojs/v1/queues/{name}/pause {"queue"}
//	queues.resume        POST /ojs/v1/queues/{name}/resume {"queue"}
//	queues.config        GET|PUT /ojs/v1/queues/{name}/config {"queue"} / {"queue", ...}
//	queues.prioritystats GET /ojs/v1/queues/{name}/priority-stats {"queue"}
//	ratelimits.list      GET /ojs/v1/rate-limits       {"limit"?, "page"?, ...}
//	ratelimits.get       GET /ojs/v1/rate-limits/{key} {"key"}
//	ratelimits.override  PUT /ojs/v1/rate-limits/{key} {"key", ...override}
//	ratelimits.clear     DELETE /ojs/v1/rate-limits/{key} {"key"}
//	deadletter.list      GET /ojs/v1/dead-letter       {"queue"?, "limit"?, ...}
//	deadletter.retry     POST /ojs/v1/dead-letter/{id}/retry {"id"}
//	deadletter.delete    DELETE /ojs/v1/dead-letter/{id} {"id"}
//	deadletter.stats     GET /ojs/v1/dead-letter/stats {}
//	events.list          GET /ojs/v1/events            query fields as body fields
//	queues.ratelimit     GET|PUT /ojs/v1/admin/queues/{name}/rate-limit {"queue"} / {"queue", limits}
//	queues.clearratelimit DELETE /ojs/v1/admin/queues/{name}/rate-limit {"queue"}
//	admin.stats          GET /ojs/v1/admin/stats       {}
//	admin.queues         GET /ojs/v1/admin/queues      {"page"?, "per_page"?}
//	admin.queue          GET /ojs/v1/admin/queues/{name} {"queue"}
//	admin.jobs           GET /ojs/v1/admin/jobs        query fields as body fields
//	admin.job            GET /ojs/v1/admin/jobs/{id}   {"id"}
//	admin.deadletter     GET /ojs/v1/admin/dead-letter query fields
//	admin.bulk           POST /ojs/v1/admin/jobs/bulk/{action} {"action", "filter", "confirm", ...}
//	admin.workers        GET /ojs/v1/admin/workers     {"page"?, "per_page"?}
//	admin.worker         GET /ojs/v1/admin/workers/{id} {"id"}
//	admin.workerquiet    POST /ojs/v1/admin/workers/{id}/quiet {"id"}
//	admin.workerterminate POST /ojs/v1/admin/workers/{id}/terminate {"id"}
//	admin.workerderegister DELETE /ojs/v1/admin/workers/{id} {"id"}
//	workers.beat         POST /ojs/v1/workers/beat
//	workers.health       GET /ojs/v1/workers/{id}/health {"id"}
//	cron.list            GET /ojs/v1/cron              {"limit"?, "offset"?, "cursor"?, "page"?, "per_page"?}
//	cron.register        POST /ojs/v1/cron             cron body
//	cron.get             GET /ojs/v1/cron/{name}       {"name"}
//	cron.put             PUT /ojs/v1/cron/{name}       {"name", ...fields to set}
//	cron.delete          DELETE /ojs/v1/cron/{name}    {"name"}
//	workflows.create     POST /ojs/v1/workflows        workflow body
//	workflows.list       GET /ojs/v1/workflows         {"page"?, "per_page"?, "state"?, "cursor"?}
//	workflows.get        GET /ojs/v1/workflows/{id}    {"id"}
//	workflows.cancel     DELETE /ojs/v1/workflows/{id} {"id"}
//	pools.list           GET /ojs/v1/admin/pools       {}
//	pools.get            GET /ojs/v1/admin/pools/{pool} {"pool"}
//	pools.set            PUT /ojs/v1/admin/pools/{pool} {"pool", ...}
//	pools.delete         DELETE /ojs/v1/admin/pools/{pool} {"pool"}
//	pools.stats          GET /ojs/v1/admin/scheduling/stats {}
//	groups.list          GET /ojs/v1/admin/worker-groups {}
//	groups.get           GET /ojs/v1/admin/worker-groups/{group} {"group"}
//	groups.set           PUT /ojs/v1/admin/worker-groups/{group} {"group", ...}
//	groups.delete        DELETE /ojs/v1/admin/worker-groups/{group} {"group"}
//	queues.aging         GET|PUT /ojs/v1/admin/queues/{name}/aging {"queue"} / {"queue", ...}
//	queues.clearaging    DELETE /ojs/v1/admin/queues/{name}/aging {"queue"}
//
// Not served over NATS: the manifest, the probes (/health, /ready), the
// metrics, the progress stream (SSE), and the admin API's aliases of
// endpoints above (admin queue pause and resume, admin job cancel and
// retry, admin dead letter retry and delete, the config alias). Live events stay on
// their own subjects (jetstream/events). Progress streams (SSE) have no
// request/reply form; subscribe to the job's events instead.
//
// # Sizes
//
// A request is at most the server's max_payload (the client cannot send
// more) and Config.MaxBodyBytes; the parts jetgate keeps have the limits
// of the record budget (ojs.PayloadLimits), 413 payload_too_large naming
// the part, the limit and the size, as over HTTP. A reply must fit
// max_payload too: jobs.batch refuses (413, field "jobs") a batch whose
// reply would not, before any of its jobs is stored, and workers.fetch
// claims jobs only while its reply has room for them (ojs.FetchBudget):
// of many large jobs it answers as many as fit (fewer than "count"), the
// others are not claimed and their ready messages go back at once, so the
// next fetch gets them; a fetch with wait_ms answers as soon as its reply
// is full. One job always fits: its record is smaller than max_payload.
//
// # Batch worker calls and waiting fetches
//
// workers.ackbatch and workers.nackbatch run one ack or nack per item (each
// its own compare-and-swap, as over HTTP), up to 64 at once, and reply
// {"results":[...]} in the items' order: an item's HTTP reply, or
// {"job_id","status","error":<envelope error object>}. workers.fetch with
// wait_ms answers as soon as count jobs are claimed or the wait ends,
// polling the backend with a backoff of 5 ms doubling to 250 ms between
// empty polls. Jobs claimed are always answered, even when a later poll
// fails or the service stops.
//
// # Access control
//
// With Config.Auth set, requests need the header "Authorization: Bearer
// <token>"; each endpoint has the operation class of its HTTP route in the
// role table of package authz (401 unauthorized, 403 forbidden envelopes).
// Tokens are never logged.
//
// # Concurrency
//
// A subscription delivers its requests one at a time; natsbind serves
// each request on its own goroutine (at most Config.MaxInFlight at once),
// so a waiting fetch never holds up another request. nats.go's micro
// package counts a request when its handler returns, which here is before
// the reply: every request counted as a success taking no time. So
// natsbind speaks the services protocol itself (micro.go: the endpoint
// subscriptions and the $SRV PING, INFO and STATS answers, in micro's
// types), and `nats micro stats ojs` counts each request when its reply
// is sent: num_errors counts error replies (400, 404, 503, ...),
// last_error is "<status>:<code>", processing_time runs from arrival to
// reply; each endpoint's data adds the requests in flight (issue 31).
// Stop drains the subscriptions, ends fetch waits and waits for every
// request in flight.
package natsbind
