// jetgate dashboard: renders the snapshots and events of
// GET /dashboard/stream (server-sent events). Plain DOM, no framework, no
// build step; every value is written with textContent, never as HTML.
"use strict";

(function () {
  const MAX_EVENTS = 50;
  const $ = (id) => document.getElementById(id);
  const fmt = new Intl.NumberFormat();
  let events = [];

  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }

  function setConn(state, text) {
    const c = $("conn");
    c.dataset.state = state;
    c.textContent = text;
    c.className = "pill " + (state === "live" ? "pill-ok" : state === "error" ? "pill-bad" : "pill-wait");
  }

  function duration(sec) {
    if (sec < 60) return sec + "s";
    if (sec < 3600) return Math.floor(sec / 60) + "m";
    if (sec < 86400) return Math.floor(sec / 3600) + "h " + Math.floor((sec % 3600) / 60) + "m";
    return Math.floor(sec / 86400) + "d " + Math.floor((sec % 86400) / 3600) + "h";
  }

  // period turns an ISO 8601 duration ("PT1M", "PT0.5S") into "1m", "0.5s".
  function period(iso) {
    const m = /^PT(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?$/.exec(iso || "");
    if (!m) return iso;
    const parts = [];
    if (m[1]) parts.push(m[1] + "h");
    if (m[2]) parts.push(m[2] + "m");
    if (m[3]) parts.push(m[3] + "s");
    return parts.join(" ") || iso;
  }

  function bar(ratio, warnAt, label) {
    const wrap = el("span");
    const b = el("span", "bar");
    const fill = el("span");
    const r = Math.max(0, Math.min(1, ratio));
    fill.style.width = (r * 100).toFixed(1) + "%";
    if (ratio >= 1) b.classList.add("full");
    else if (warnAt && ratio >= warnAt) b.classList.add("warn");
    b.appendChild(fill);
    wrap.appendChild(b);
    wrap.appendChild(el("span", "barlabel", label));
    return wrap;
  }

  function renderHeader(s) {
    $("version").textContent = s.server.version ? "v" + s.server.version : "";
    const sv = s.server;
    $("server").textContent = "server " + (sv.status || "?") + " · NATS " + (sv.backend_status || "?") +
      " " + sv.backend_latency_ms + " ms · up " + duration(sv.uptime_seconds || 0);
    const t = new Date(s.generated_at);
    $("updated").textContent = "updated " + t.toLocaleTimeString() + " · snapshot " + fmt.format(s.took_us) + " µs";
    const errs = $("errors");
    errs.hidden = !(s.errors && s.errors.length);
    errs.textContent = (s.errors || []).join(" · ");
  }

  function renderTotals(s) {
    const t = s.totals;
    const cards = [
      ["queues", t.queues], ["paused", t.paused_queues],
      ["available", t.jobs.available], ["active", t.jobs.active], ["scheduled", t.jobs.scheduled],
      ["retryable", t.jobs.retryable], ["pending", t.jobs.pending], ["waiting on limits", t.waiting],
      ["completed", t.jobs.completed], ["discarded", t.jobs.discarded], ["cancelled", t.jobs.cancelled],
    ];
    const box = $("totals");
    box.replaceChildren(...cards.map(([k, v]) => {
      const c = el("div", "card");
      c.dataset.total = k;
      c.appendChild(el("div", "v", fmt.format(v || 0)));
      c.appendChild(el("div", "k", k));
      return c;
    }));
  }

  function pressureCell(q) {
    const td = el("td", "pressure");
    if (!q.bound) {
      td.appendChild(el("span", "muted", "unbounded"));
      return td;
    }
    const b = q.bound;
    if (q.pressure !== undefined && q.pressure !== null) {
      td.appendChild(bar(q.pressure, b.warning_threshold,
        fmt.format(q.depth) + " / " + fmt.format(b.max_depth) + " · " + b.strategy));
    } else {
      td.appendChild(el("span", "muted", "≤ " + fmt.format(b.max_size_bytes) + " B · " + b.strategy));
    }
    td.title = "bound from " + b.source + (b.count_active ? ", counts active jobs" : "");
    return td;
  }

  function levelsCell(q) {
    const td = el("td", "levels");
    if (!q.priorities.length) td.appendChild(el("span", "muted", "—"));
    for (const l of q.priorities) td.appendChild(el("span", "chip", "p" + l.priority + ": " + fmt.format(l.count)));
    return td;
  }

  function renderQueues(s) {
    const body = $("queues").tBodies[0];
    const old = new Map([...body.rows].map((r) => [r.dataset.queue, r]));
    const rows = s.queues.map((q) => {
      const c = q.counts || {};
      const tr = el("tr");
      tr.dataset.queue = q.name;
      const prev = old.get(q.name);
      tr.appendChild(el("td", "name", q.name));
      const st = el("td");
      st.appendChild(el("span", "pill " + (q.paused ? "pill-paused" : "pill-active"), q.paused ? "paused" : "active"));
      if (q.error) st.appendChild(el("span", "chip note", q.error));
      tr.appendChild(st);
      for (const k of ["available", "active", "scheduled", "retryable", "pending"]) {
        const td = el("td", "num", fmt.format(c[k] || 0));
        td.dataset.field = k;
        tr.appendChild(td);
      }
      const depth = el("td", "num", fmt.format(q.depth));
      depth.dataset.field = "depth";
      tr.appendChild(depth);
      tr.appendChild(pressureCell(q));
      tr.appendChild(levelsCell(q));
      for (const k of ["completed", "discarded"]) {
        const td = el("td", "num", fmt.format(c[k] || 0));
        td.dataset.field = k;
        tr.appendChild(td);
      }
      if (prev && prev.dataset.sig !== sig(q)) tr.classList.add("changed");
      tr.dataset.sig = sig(q);
      return tr;
    });
    body.replaceChildren(...rows);
    $("queues-empty").hidden = rows.length > 0;
    $("queues-note").textContent = s.queues_omitted ? "(" + s.queues_omitted + " more not shown)" : "";
  }

  function sig(q) {
    return JSON.stringify([q.counts, q.depth, q.paused]);
  }

  function renderLimits(s) {
    const body = $("limits").tBodies[0];
    const rows = s.rate_limits.map((k) => {
      const tr = el("tr");
      tr.dataset.key = k.scope + ":" + k.key;
      tr.appendChild(el("td", "name", k.key));
      tr.appendChild(el("td", "", k.scope));
      const conc = el("td");
      if (k.concurrency) {
        conc.appendChild(bar(k.concurrency.limit ? k.concurrency.active / k.concurrency.limit : 0, 0.8,
          k.concurrency.active + " / " + k.concurrency.limit));
      } else conc.appendChild(el("span", "muted", "—"));
      tr.appendChild(conc);
      const win = el("td");
      if (k.rate) {
        win.appendChild(bar(k.rate.limit ? k.rate.current_count / k.rate.limit : 0, 0.8,
          k.rate.current_count + " / " + k.rate.limit + " per " + period(k.rate.period)));
      } else win.appendChild(el("span", "muted", "—"));
      tr.appendChild(win);
      tr.appendChild(el("td", "", k.throttle ? k.throttle.limit + " per " + period(k.throttle.period) : "—"));
      const w = el("td", "num", fmt.format(k.waiting_count));
      w.dataset.field = "waiting";
      tr.appendChild(w);
      const notes = el("td");
      if (k.override) notes.appendChild(el("span", "chip note", "override" + (k.override.expires_at ? " until " + new Date(k.override.expires_at).toLocaleTimeString() : "")));
      if (k.rate_limit_until) notes.appendChild(el("span", "chip note", "held until " + new Date(k.rate_limit_until).toLocaleTimeString()));
      notes.appendChild(el("span", "muted", fmt.format(k.starts_total) + " starts"));
      tr.appendChild(notes);
      return tr;
    });
    body.replaceChildren(...rows);
    $("limits-empty").hidden = rows.length > 0;
    $("limits-note").textContent = s.rate_limits_omitted ? "(" + s.rate_limits_omitted + " more not shown)" : "";
  }

  function eventItem(e, fresh) {
    const li = el("li", fresh ? "new" : "");
    li.dataset.id = e.id;
    li.appendChild(el("span", "t", new Date(e.time).toLocaleTimeString()));
    const short = e.type.replace(/^job\./, "");
    li.appendChild(el("span", "ty " + short, e.type));
    const d = e.data || {};
    const parts = [];
    if (d.queue) parts.push("queue " + d.queue);
    if (d.job_type) parts.push(d.job_type);
    if (e.subject) parts.push(e.subject);
    li.appendChild(el("span", "s", parts.join(" · ")));
    return li;
  }

  function renderEvents(fresh) {
    const ids = new Set(fresh || []);
    $("events").replaceChildren(...events.map((e) => eventItem(e, ids.has(e.id))));
    $("events-empty").hidden = events.length > 0;
  }

  function onSnapshot(s) {
    renderHeader(s);
    renderTotals(s);
    renderQueues(s);
    renderLimits(s);
    events = (s.events || []).slice(0, MAX_EVENTS);
    renderEvents();
  }

  function onEvents(list) {
    const known = new Set(events.map((e) => e.id));
    const fresh = list.filter((e) => !known.has(e.id));
    events = fresh.concat(events).slice(0, MAX_EVENTS);
    renderEvents(fresh.map((e) => e.id));
  }

  // The stream is open only while the page is visible: each open page
  // keeps the server's feeder reading (one snapshot a second for all
  // pages), so a tab in the background lets it rest.
  let es = null;

  function connect() {
    if (es) return;
    es = new EventSource("/dashboard/stream");
    const me = es;
    es.addEventListener("open", () => setConn("live", "live"));
    es.addEventListener("snapshot", (m) => {
      setConn("live", "live");
      onSnapshot(JSON.parse(m.data));
    });
    es.addEventListener("events", (m) => onEvents(JSON.parse(m.data)));
    es.addEventListener("error", () => {
      // EventSource reconnects by itself (retry: 2 s); a 401 or 403 closes it.
      if (me.readyState === EventSource.CLOSED) {
        if (es === me) es = null;
        setConn("error", "disconnected: reload the page");
      } else {
        setConn("connecting", "reconnecting");
      }
    });
  }

  function disconnect() {
    if (!es) return;
    es.close();
    es = null;
    setConn("paused", "paused (tab hidden)");
  }

  document.addEventListener("visibilitychange", () => {
    if (document.visibilityState === "hidden") disconnect();
    else connect();
  });
  connect();
})();
