// The backlog dashboard: a single page over the JSON API (`/api/v1/…`), in plain JavaScript
// with no dependency, served from the `backlog` binary itself.
//
// Authentication and CSRF: the token the user types is kept in sessionStorage (it is gone when
// the tab closes) and sent as `Authorization: Bearer …` with every API call. The dashboard never
// sets or reads a cookie, and every fetch says `credentials: "omit"`. A page on another site can
// therefore not act as the user: a cross-site form post or fetch carries no Authorization header,
// and the API answers it 401. That is the whole CSRF protection; no CSRF token is needed or sent.
//
// Pages are hash routes: `#/` (overview), `#/queues/NAME[/STATE]` (a queue's jobs by state; the
// `dead` tab is the dead-letter view), `#/jobs/ID`. The current page is fetched and re-rendered
// every few seconds, except while a form on it is being edited or the tab is hidden: one refresh
// at a time, the next a few seconds after the last one ended (longer when answers are slow).
"use strict";

(() => {
  const TOKEN_KEY = "backlog.token";
  const REFRESH_MS = 3000;
  // A refresh that took t waits 3t before the next, up to this.
  const SLOWEST_REFRESH_MS = 60000;
  const PAGE_SIZE = 50;
  // The states a queue page has a tab for, as the API's `state` filter names them.
  const STATES = [
    "available", "scheduled", "retrying", "waiting", "running",
    "completed", "dead", "cancelled", "held",
  ];
  const WINDOWS = [[60, "1 hour"], [360, "6 hours"], [1440, "24 hours"]];

  const app = {
    me: null, // {name, scope} once signed in
    flash: null, // what the next page shows once an action moved there
    history: null, // {key, view}: the chart history read last, for the next refresh
    window: 60, // minutes of history on charts
    cursor: { key: "", stack: [], after: null }, // paging of the job table
    busy: 0, // actions in flight: no refresh meanwhile
    renderSeq: 0,
    refreshing: false, // a live refresh in flight
    maxAttempts: new Map(), // queue name → {value, at}: its max attempts, read at `at`
    timer: null,
  };

  // ---------------------------------------------------------------------------------------
  // DOM helpers. Text always goes in through text nodes, never as HTML: payloads, errors and
  // names are user data.

  const SVG_NS = "http://www.w3.org/2000/svg";

  function setAttrs(el, attrs) {
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
      else el.setAttribute(k, v === true ? "" : String(v));
    }
  }

  function append(el, kids) {
    for (const k of kids.flat(Infinity)) {
      if (k === null || k === undefined || k === false) continue;
      el.append(k instanceof Node ? k : String(k));
    }
    return el;
  }

  function h(tag, attrs, ...kids) {
    const el = document.createElement(tag);
    setAttrs(el, attrs);
    return append(el, kids);
  }

  function svg(tag, attrs, ...kids) {
    const el = document.createElementNS(SVG_NS, tag);
    setAttrs(el, attrs);
    return append(el, kids);
  }

  const $ = (id) => document.getElementById(id);

  // ---------------------------------------------------------------------------------------
  // The API.

  class ApiError extends Error {
    constructor(status, code, message) {
      super(message);
      this.status = status;
      this.code = code;
    }
  }

  async function api(method, path, body) {
    const headers = { Accept: "application/json" };
    const token = sessionStorage.getItem(TOKEN_KEY);
    if (token) headers.Authorization = "Bearer " + token;
    if (body !== undefined) headers["Content-Type"] = "application/json";
    let res;
    try {
      res = await fetch(path, {
        method,
        headers,
        body: body === undefined ? undefined : JSON.stringify(body),
        credentials: "omit",
        cache: "no-store",
      });
    } catch (e) {
      throw new ApiError(0, "unreachable", "cannot reach the server (" + e.message + ")");
    }
    const text = await res.text();
    let data = null;
    if (text) {
      try {
        data = JSON.parse(text);
      } catch (_) {
        data = text;
      }
    }
    if (!res.ok) {
      const err = data && data.error;
      throw new ApiError(
        res.status,
        err ? err.code : "http_" + res.status,
        err ? err.message : `${method} ${path} answered ${res.status}`,
      );
    }
    return data;
  }

  const isAdmin = () => app.me && app.me.scope === "admin";
  const enc = encodeURIComponent;

  // ---------------------------------------------------------------------------------------
  // The banner: API errors (red) and what an action did (green, fades).

  let bannerTimer = null;

  function banner(kind, text) {
    clearTimeout(bannerTimer);
    const b = $("banner");
    b.className = "banner " + kind;
    $("banner-text").textContent = text;
    b.hidden = false;
    if (kind === "ok") bannerTimer = setTimeout(() => (b.hidden = true), 4000);
  }

  function showError(e) {
    if (e instanceof ApiError && e.status === 401 && app.me) {
      // The token was revoked or the server restarted with other tokens.
      signOut("Signed out: " + e.message);
      return;
    }
    const code = e instanceof ApiError ? e.code : "error";
    banner("error", `${code}: ${e.message}`);
  }

  function clearBanner() {
    $("banner").hidden = true;
  }

  // ---------------------------------------------------------------------------------------
  // Formatting.

  const pad = (n) => String(n).padStart(2, "0");

  // Times come from the API as microseconds since the epoch (exact, whatever the field names).
  const dateOf = (us) => new Date(us / 1000);

  // The browser's offset from UTC at `d`, as `UTC`, `UTC+01:00`, `UTC-05:30`.
  function zoneOf(d) {
    const off = -d.getTimezoneOffset();
    if (off === 0) return "UTC";
    const a = Math.abs(off);
    return `UTC${off > 0 ? "+" : "-"}${pad(Math.floor(a / 60))}:${pad(a % 60)}`;
  }

  function localTime(us) {
    if (us === null || us === undefined) return "—";
    const d = dateOf(us);
    return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ` +
      `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())} ${zoneOf(d)}`;
  }

  // An error for a table cell: `backlog work`'s "command exit status: 1: <stderr>" shows the
  // command's last line of stderr first, its status after (the cell is too narrow for both, and
  // the status is the same in every row); anything else as it is.
  function errorSummary(error) {
    const m = /^command (exit status: \d+|signal: [^:]*)(?:: ([\s\S]*))?$/.exec(error);
    if (!m) return error;
    const last = (m[2] || "").trim().split("\n").pop().trim();
    return last ? `${last} · ${m[1]}` : `command ${m[1]}`;
  }

  function relative(us) {
    if (us === null || us === undefined) return "—";
    const s = Math.round((dateOf(us).getTime() - Date.now()) / 1000);
    const a = Math.abs(s);
    const n = a < 60 ? `${a}s` : a < 3600 ? `${Math.floor(a / 60)}m` :
      a < 86400 ? `${Math.floor(a / 3600)}h` : `${Math.floor(a / 86400)}d`;
    if (a < 2) return "now";
    return s < 0 ? `${n} ago` : `in ${n}`;
  }

  // A time cell: relative, with the local time on hover.
  const when = (us) => h("time", {
    datetime: us === null || us === undefined ? "" : dateOf(us).toISOString(), title: localTime(us),
  }, relative(us));

  const fmtNum = (n) => (n === null || n === undefined ? "—" : Number(n).toLocaleString("en-US"));
  // 250K, 1.5M: for a chart's axis, whose labels have room for about five characters.
  const compact = new Intl.NumberFormat("en-US", { notation: "compact", maximumFractionDigits: 1 });
  const pretty = (v) => JSON.stringify(v, null, 2);

  function preview(v, max = 90) {
    const s = JSON.stringify(v);
    return s.length > max ? s.slice(0, max - 1) + "…" : s;
  }

  function stateBadge(state) {
    return h("span", { class: "badge st-" + state }, state);
  }

  // ---------------------------------------------------------------------------------------
  // Charts: hand-drawn SVG over the history endpoint's minutes.

  const Charts = (() => {
    const W = 360, H = 150, L = 40, R = 8, T = 10, B = 22;

    // The smallest of 1, 2, 5 × 10^k at or above v (at least 1).
    function niceMax(v) {
      if (!(v > 0)) return 1;
      const p = Math.pow(10, Math.floor(Math.log10(v)));
      for (const m of [1, 2, 5, 10]) if (m * p >= v) return m * p;
      return 10 * p;
    }

    // At most `n` buckets: counts are summed, gauges (depth) keep their last value seen.
    function bucket(minutes, n, gauges) {
      const size = Math.max(1, Math.ceil(minutes.length / n));
      const out = [];
      for (let i = 0; i < minutes.length; i += size) {
        const group = minutes.slice(i, i + size);
        const b = { minute: group[0].minute, span: group.length };
        for (const m of group) {
          for (const [k, v] of Object.entries(m)) {
            if (k === "minute" || typeof v === "string") continue;
            if (gauges.includes(k)) {
              if (v !== null && v !== undefined) b[k] = v;
              else if (!(k in b)) b[k] = null;
            } else {
              b[k] = (b[k] || 0) + (v || 0);
            }
          }
        }
        out.push(b);
      }
      return out;
    }

    const hhmm = (us) => {
      const d = dateOf(us);
      return `${pad(d.getHours())}:${pad(d.getMinutes())}`;
    };

    // An SVG chart of `series` ([{key, label}]) over `minutes`: lines (with gaps where a value
    // is null) or grouped bars.
    function draw(minutes, series, kind) {
      const gauges = kind === "line-gauge" ? series.map((s) => s.key) : [];
      const data = bucket(minutes, kind === "bars" ? 60 : 120, gauges);
      const n = data.length;
      const max = niceMax(Math.max(0, ...data.flatMap((d) => series.map((s) => d[s.key] || 0))));
      const pw = W - L - R, ph = H - T - B;
      const x = (i) => L + (n <= 1 ? pw / 2 : (i * pw) / (n - 1));
      const y = (v) => T + ph - (v / max) * ph;
      const root = svg("svg", {
        viewBox: `0 0 ${W} ${H}`, class: "chart-svg", role: "img",
        "aria-label": series.map((s) => s.label).join(", ") + " per minute",
      });
      for (const f of [0, 0.5, 1]) {
        const gy = T + ph - f * ph;
        root.append(svg("line", { x1: L, x2: W - R, y1: gy, y2: gy, class: "grid" }));
        // Counts are whole: no label at a fraction.
        if (Number.isInteger(max * f)) {
          root.append(svg("text", { x: L - 6, y: gy + 4, class: "ylabel" }, compact.format(max * f)));
        }
      }
      const labelIdx = n <= 1 ? [0] : [0, Math.floor((n - 1) / 2), n - 1];
      for (const i of labelIdx) {
        const anchor = i === 0 && n > 1 ? "start" : i === n - 1 && n > 1 ? "end" : "middle";
        root.append(svg("text", { x: x(i), y: H - 6, class: "xlabel", "text-anchor": anchor },
          hhmm(data[i].minute)));
      }
      if (kind === "bars") {
        const slot = pw / n;
        const bw = Math.max(1, (slot * 0.8) / series.length);
        data.forEach((d, i) => {
          series.forEach((s, j) => {
            const v = d[s.key] || 0;
            if (v <= 0) return;
            root.append(svg("rect", {
              x: L + i * slot + slot * 0.1 + j * bw, y: y(v), width: bw, height: T + ph - y(v),
              class: "bar s-" + s.key,
            }));
          });
        });
      } else {
        for (const s of series) {
          let d = "";
          let pen = false;
          data.forEach((m, i) => {
            const v = m[s.key];
            if (v === null || v === undefined) {
              pen = false;
              return;
            }
            d += `${pen ? "L" : "M"}${x(i).toFixed(1)},${y(v).toFixed(1)}`;
            pen = true;
          });
          if (d) root.append(svg("path", { d, class: "line s-" + s.key }));
          // A value with no neighbour draws no line: mark it with a dot.
          data.forEach((m, i) => {
            const v = m[s.key];
            const near = (j) => data[j] && data[j][s.key] !== null && data[j][s.key] !== undefined;
            if (v === null || v === undefined || near(i - 1) || near(i + 1)) return;
            root.append(svg("circle", { cx: x(i), cy: y(v), r: 2.5, class: "dot s-" + s.key }));
          });
        }
      }
      // One hover target per bucket, with its numbers as a tooltip.
      const slot = pw / Math.max(1, n);
      data.forEach((d, i) => {
        const tip = hhmm(d.minute) + (d.span > 1 ? ` (+${d.span - 1} min)` : "") + "\n" +
          series.map((s) => `${s.label}: ${fmtNum(d[s.key])}`).join("\n");
        const cx = kind === "bars" ? L + i * slot : x(i) - slot / 2;
        root.append(svg("rect", { x: cx, y: T, width: slot, height: ph, class: "hover" },
          svg("title", {}, tip)));
      });
      return root;
    }

    const CHARTS = [
      { title: "Throughput", note: "per minute", kind: "line",
        series: [{ key: "completed", label: "completed" }, { key: "enqueued", label: "enqueued" }] },
      { title: "Failures", note: "per minute", kind: "bars",
        series: [{ key: "failed", label: "failed" }, { key: "dead", label: "dead" }] },
      { title: "Depth", note: "jobs", kind: "line-gauge",
        series: [{ key: "available", label: "available" }, { key: "scheduled", label: "scheduled" },
          { key: "running", label: "running" }] },
    ];

    // The three chart cards over `history` (null: there is none yet).
    function cards(history) {
      const minutes = history && history.minutes ? history.minutes : [];
      return CHARTS.map((c) => {
        const totals = c.series.map((s) =>
          `${fmtNum(minutes.reduce((t, m) => t + (m[s.key] || 0), 0))} ${s.label}`);
        const sampled = c.kind !== "line-gauge" ||
          minutes.some((m) => c.series.some((s) => m[s.key] !== null && m[s.key] !== undefined));
        let body;
        if (minutes.length === 0) body = h("div", { class: "chart-empty" }, "No history yet");
        else if (!sampled) body = h("div", { class: "chart-empty" }, "No depth sampled yet: running workers sample it each minute");
        else body = draw(minutes, c.series, c.kind);
        return h("section", { class: "card chart", "data-chart": c.title.toLowerCase() },
          h("header", {},
            h("h3", {}, c.title, " ", h("small", { class: "muted" }, c.note)),
            h("ul", { class: "legend" }, c.series.map((s) =>
              h("li", {}, h("span", { class: "swatch s-" + s.key }), s.label)))),
          body,
          c.kind === "line-gauge" || minutes.length === 0 ? null
            : h("p", { class: "chart-foot muted" }, `${totals.join(" · ")} in ${windowName()}`));
      });
    }

    return { niceMax, bucket, draw, cards };
  })();

  // "the last hour", "the last 6 hours"…
  const windowName = () => {
    const w = WINDOWS.find(([m]) => m === app.window);
    return w ? "the last " + w[1].replace(/^1 /, "") : "the window";
  };

  // History of a queue (or of all queues), or null while the server has none (404). The window
  // read last is kept: a refresh asks only for its newest minutes (those processes may still
  // add to: each adds its counts every 5 s), not the whole window again.
  const HISTORY_TAIL = 3;
  const MINUTE_US = 60000000;
  async function history(queue) {
    const q = queue ? `queue=${enc(queue)}&` : "";
    const key = `${queue || ""}/${app.window}`;
    const kept = app.history && app.history.key === key ? app.history.view : null;
    let fresh;
    try {
      fresh = await api("GET", `/api/v1/history?${q}minutes=${kept ? HISTORY_TAIL : app.window}`);
    } catch (e) {
      app.history = null;
      if (e instanceof ApiError && e.status === 404) return null;
      throw e;
    }
    const first = fresh.minutes.length ? fresh.minutes[0].minute : null;
    const last = kept && kept.minutes.length ? kept.minutes[kept.minutes.length - 1].minute : null;
    if (kept && first !== null && last !== null && last >= first - MINUTE_US) {
      const older = kept.minutes.filter((m) => m.minute < first);
      fresh = { ...fresh, minutes: older.concat(fresh.minutes).slice(-app.window) };
    } else if (kept) {
      // A gap since the last read (a hidden tab, a slow server): the whole window again.
      app.history = null;
      return history(queue);
    }
    app.history = { key, view: fresh };
    return fresh;
  }

  function chartRow(hist) {
    const picker = h("div", { class: "segmented", role: "group", "aria-label": "History window" },
      WINDOWS.map(([m, label]) => h("button", {
        type: "button", class: m === app.window ? "on" : "", "data-window": m,
        onclick: () => { app.window = m; render(false); },
      }, label)));
    return h("section", { class: "charts-block" },
      h("div", { class: "section-head" }, h("h2", {}, "Activity"), picker),
      h("div", { class: "charts" }, Charts.cards(hist)));
  }

  // ---------------------------------------------------------------------------------------
  // Overview: every queue with its counts, and the charts.

  const COUNT_COLS = [
    "available", "scheduled", "retrying", "waiting", "running", "completed", "dead", "cancelled", "held",
  ];

  async function overviewPage() {
    const [list, hist] = await Promise.all([api("GET", "/api/v1/queues"), history(null)]);
    const queues = list.queues;
    const totals = {};
    for (const c of COUNT_COLS) totals[c] = queues.reduce((t, q) => t + q.stats[c], 0);
    const paused = queues.filter((q) => q.settings.paused).length;

    const tiles = h("div", { class: "tiles" },
      ["available", "scheduled", "running", "dead"].map((c) =>
        h("div", { class: `tile st-${c}` + (c === "dead" && totals.dead > 0 ? " alert" : "") },
          h("div", { class: "tile-num" }, fmtNum(totals[c])),
          h("div", { class: "tile-label" }, c))),
      h("div", { class: "tile" + (paused ? " warn" : "") },
        h("div", { class: "tile-num" }, `${queues.length}`),
        h("div", { class: "tile-label" }, paused ? `queues · ${paused} paused` : "queues")));

    const table = queues.length === 0
      ? h("p", { class: "empty" }, "No queues yet. Enqueue a job and its queue appears here.")
      : h("table", { class: "grid-table", id: "queues" },
        h("thead", {}, h("tr", {},
          h("th", {}, "Queue"), h("th", {}, "Status"),
          COUNT_COLS.map((c) => h("th", { class: "num" }, c)))),
        h("tbody", {}, queues.map((q) => h("tr", { "data-queue": q.settings.name },
          h("td", {}, h("a", { href: `#/queues/${enc(q.settings.name)}`, class: "strong" }, q.settings.name)),
          h("td", {}, q.settings.paused
            ? h("span", { class: "badge paused" }, "paused")
            : h("span", { class: "badge active" }, "active")),
          COUNT_COLS.map((c) => {
            const n = q.stats[c];
            return h("td", { class: "num" + (n === 0 ? " zero" : ` st-text-${c}`), "data-count": c },
              n === 0 ? "0" : h("a", { href: `#/queues/${enc(q.settings.name)}/${c}` }, fmtNum(n)));
          })))));

    return [
      h("div", { class: "page-head" }, h("h1", {}, "Overview")),
      tiles,
      chartRow(hist),
      h("section", {}, h("div", { class: "section-head" }, h("h2", {}, "Queues")), table),
    ];
  }

  // ---------------------------------------------------------------------------------------
  // A queue: its jobs by state (the dead tab is the dead-letter view), pause and resume,
  // redrive, settings, and its charts.

  // The paging cursor of the list `key` names: a new list starts at its first page.
  function cursorFor(key) {
    if (app.cursor.key !== key) app.cursor = { key, stack: [], after: null };
    return app.cursor;
  }

  function pageCursor(route) {
    return cursorFor(`${route.queue}/${route.state}?${route.kind || ""}`);
  }

  // A list's pager: `summary`, and buttons back to the page before and on to `next`.
  function pager(cur, next, summary, [back, on]) {
    return h("div", { class: "pager" },
      h("span", { class: "muted" }, summary),
      h("span", {},
        cur.stack.length ? h("button", {
          type: "button", class: "btn small", id: "prev-page",
          onclick: () => { cur.after = cur.stack.pop(); render(false); },
        }, back) : null,
        next ? h("button", {
          type: "button", class: "btn small", id: "next-page",
          onclick: () => { cur.stack.push(cur.after); cur.after = next; render(false); },
        }, on) : null));
  }

  async function act(what, fn, done) {
    app.busy++;
    try {
      const out = await fn();
      banner("ok", typeof done === "function" ? done(out) : done);
      await render(false);
    } catch (e) {
      showError(e);
    } finally {
      app.busy--;
    }
  }

  // Redrives the `count` dead jobs the button named (the API's default is 1,000 a call), in
  // batches that each hold their rows' locks briefly; stops early once none is left.
  const REDRIVE_BATCH = 10000;
  async function redriveAll(base, count) {
    let redriven = 0;
    while (redriven < count) {
      const limit = Math.min(REDRIVE_BATCH, count - redriven);
      const r = await api("POST", base + "/redrive", { limit });
      redriven += r.redriven;
      if (r.redriven < limit) break;
    }
    return { redriven };
  }

  // The actions a bulk bar offers on a state's tab: those that apply to jobs in that state.
  const BULK_ACTIONS = {
    available: ["hold", "cancel", "delete"], scheduled: ["run_now", "hold", "cancel", "delete"],
    retrying: ["run_now", "hold", "cancel", "delete"], waiting: ["cancel", "delete"],
    held: ["release", "cancel", "delete"], dead: ["retry", "delete"], cancelled: ["retry", "delete"],
    completed: ["retry", "delete"], running: ["cancel"],
  };
  const BULK_LABEL = { retry: "Retry", cancel: "Cancel", hold: "Hold", release: "Release", run_now: "Run now", delete: "Delete" };
  const BULK_POLL_MS = 500;

  // Starts a bulk action on the server and follows it to its end, showing how far it got
  // (`total`: the count the button named), then answers its final counts.
  async function runBulk(action, body, total, what) {
    let s = await api("POST", "/api/v1/jobs/bulk", { action, ...body, wait: false });
    while (!s.done) {
      banner("info", `${BULK_LABEL[action]}: ${fmtNum(s.seen)} of ${fmtNum(total)} ${what} done, ${fmtNum(s.changed)} changed…`);
      await new Promise((r) => setTimeout(r, BULK_POLL_MS));
      s = await api("GET", `/api/v1/jobs/bulk/${s.id}`);
    }
    if (s.error) throw new Error(`stopped after ${fmtNum(s.seen)} jobs: ${s.error}`);
    return s;
  }

  // Applies `action` to the jobs checked on the page, or to every job of the tab (its state,
  // and kind filter) after a confirmation that names the count: one request, audited as one
  // action (job.bulk) with what it changed.
  function bulkBar(name, route, count) {
    const acts = BULK_ACTIONS[route.state] || [];
    if (!isAdmin() || acts.length === 0 || count === 0) return null;
    const checked = () => [...document.querySelectorAll("#jobs input.pick:checked")].map((c) => Number(c.value));
    const run = (action, body, total, what) => act(`bulk-${action}`, () => runBulk(action, body, total, what),
      (r) => `${BULK_LABEL[action]}: ${fmtNum(r.changed)} of ${fmtNum(r.seen)} ${what} changed`);
    const kindNote = route.kind ? ` of kind ${route.kind}` : "";
    return h("div", { class: "bulk", id: "bulk" },
      h("span", { class: "muted" }, "Checked jobs, or all of this tab:"),
      acts.map((a) => [
        h("button", {
          type: "button", class: "btn small", id: `bulk-${a}-checked`,
          onclick: () => {
            const ids = checked();
            if (ids.length === 0) return banner("error", "Check some jobs first.");
            if (!confirm(`${BULK_LABEL[a]} ${ids.length} checked job${ids.length === 1 ? "" : "s"} of ${name}?`)) return;
            run(a, { ids }, ids.length, "checked jobs");
          },
        }, `${BULK_LABEL[a]} checked`),
        h("button", {
          type: "button", class: "btn small danger", id: `bulk-${a}-all`,
          onclick: () => {
            if (!confirm(`${BULK_LABEL[a]} all ${fmtNum(count)} ${route.state} jobs${kindNote} of ${name}?`)) return;
            run(a, { queue: name, state: route.state, kind: route.kind || undefined }, count, `${route.state} jobs`);
          },
        }, `${BULK_LABEL[a]} all ${route.kind ? "of this kind" : fmtNum(count)}`),
      ]));
  }

  async function queuePage(route) {
    const name = route.queue;
    const cur = pageCursor(route);
    const after = cur.after ? `&after=${cur.after}` : "";
    // A kind filter (`?kind=` in the hash) reads the jobs list, which takes one.
    const kindQ = route.kind ? `&kind=${enc(route.kind)}` : "";
    const jobsPath = route.state === "dead" && !route.kind
      ? `/api/v1/queues/${enc(name)}/dead?limit=${PAGE_SIZE}${after}`
      : `/api/v1/jobs?queue=${enc(name)}&state=${route.state}${kindQ}&limit=${PAGE_SIZE}${after}`;
    const kindHash = route.kind ? `?kind=${enc(route.kind)}` : "";
    let q, page, hist, paused;
    try {
      [q, page, hist] = await Promise.all([
        api("GET", `/api/v1/queues/${enc(name)}`), api("GET", jobsPath), history(name),
      ]);
      if (q.settings.paused) paused = await pausedBy(name);
    } catch (e) {
      // A name with neither settings nor jobs (a typo, or a link to a queue gone): said so,
      // with no action that would create it.
      if (e instanceof ApiError && e.code === "queue_not_found") {
        return h("div", { class: "card", id: "no-such-queue" },
          h("h1", {}, "No such queue"),
          h("p", { class: "muted" }, `There is no queue named "${name}": it has no settings and no jobs.`),
          h("p", {}, h("a", { href: "#/" }, "All queues")));
      }
      throw e;
    }
    const s = q.settings;
    const base = `/api/v1/queues/${enc(name)}`;

    const actions = !isAdmin() ? null : h("div", { class: "actions" },
      s.paused
        ? h("button", { type: "button", class: "btn primary", id: "resume",
          onclick: () => act("resume", () => api("POST", base + "/resume"), `Queue ${name} resumed`) }, "Resume")
        : h("button", { type: "button", class: "btn", id: "pause",
          onclick: () => act("pause", () => api("POST", base + "/pause"), `Queue ${name} paused`) }, "Pause"));

    const tabs = h("nav", { class: "tabs", "aria-label": "Job states" }, STATES.map((st) =>
      h("a", {
        href: `#/queues/${enc(name)}/${st}${kindHash}`, class: st === route.state ? "on" : "", "data-state": st,
      }, st, st in q.stats ? h("span", { class: "count" + (q.stats[st] ? ` st-bg-${st}` : "") }, fmtNum(q.stats[st])) : null)));

    let deadHead = null;
    if (route.state === "dead") {
      deadHead = h("div", { class: "dead-head" },
        h("div", {},
          h("h2", {}, "Dead letters"),
          h("p", { class: "muted" }, "Jobs that used up their attempts or were discarded. ",
            "Redrive moves them back to available, attempts reset, oldest first.")),
        isAdmin() && q.stats.dead > 0 ? h("button", {
          type: "button", class: "btn danger", id: "redrive",
          onclick: () => act("redrive", () => redriveAll(base, q.stats.dead),
            (r) => `${fmtNum(r.redriven)} dead job${r.redriven === 1 ? "" : "s"} of ${name} redriven`),
        }, `Redrive ${fmtNum(q.stats.dead)}`) : null);
    }

    const timeCol = {
      available: ["Due", "run_at"], scheduled: ["Runs", "run_at"],
      retrying: ["Retries", "run_at"], running: ["Started", "attempted_at"],
      held: ["Created", "created_at"],
    }[route.state] || ["Finished", "finished_at"];
    const errorCol = ["dead", "retrying", "cancelled"].includes(route.state);
    const tabCount = q.stats[route.state] ?? page.jobs.length;
    const bulk = bulkBar(name, route, tabCount);
    const pickable = bulk !== null;

    const rows = page.jobs.map((j) => {
      const last = j.errors.length ? j.errors[j.errors.length - 1].error : "";
      return h("tr", { "data-job": j.id },
        pickable ? h("td", {}, h("input", { type: "checkbox", class: "pick", value: j.id, "aria-label": `Job ${j.id}` })) : null,
        h("td", { class: "num" }, h("a", { href: `#/jobs/${j.id}`, class: "strong" }, `#${j.id}`)),
        h("td", {}, j.kind
          ? h("a", { href: `#/queues/${enc(name)}/${route.state}?kind=${enc(j.kind)}`, title: "Only this kind" }, j.kind)
          : h("span", { class: "muted" }, "—")),
        h("td", {}, stateBadge(j.reported_state)),
        h("td", { class: "num" }, `${j.attempt}/${j.max_attempts ?? s.max_attempts}`),
        h("td", { class: "num" }, j.priority),
        h("td", {}, when(j.created_at)),
        h("td", {}, when(j[timeCol[1]])),
        h("td", { class: "mono clip", title: preview(j.payload, 2000) }, preview(j.payload)),
        errorCol ? h("td", { class: "clip error-text", title: last }, errorSummary(last)) : null);
    });

    const table = page.jobs.length === 0
      ? h("p", { class: "empty" }, cur.after ? "No more jobs." : `No ${route.state} jobs.`)
      : h("table", { class: "grid-table", id: "jobs" },
        h("thead", {}, h("tr", {},
          pickable ? h("th", {}, h("input", {
            type: "checkbox", id: "pick-all", "aria-label": "Every job of this page",
            onchange: (e) => document.querySelectorAll("#jobs input.pick").forEach((c) => { c.checked = e.target.checked; }),
          })) : null,
          h("th", { class: "num" }, "Job"), h("th", {}, "Kind"), h("th", {}, "State"),
          h("th", { class: "num" }, "Attempt"), h("th", { class: "num" }, "Prio"),
          h("th", {}, "Created"), h("th", {}, timeCol[0]), h("th", {}, "Payload"),
          errorCol ? h("th", {}, "Last error") : null)),
        h("tbody", {}, rows));

    const pages = pager(cur, page.next, page.jobs.length
      ? `Page ${cur.stack.length + 1} · ${page.jobs.length} job${page.jobs.length === 1 ? "" : "s"}` : "",
    ["← Previous", "Next page →"]);

    return [
      h("div", { class: "crumbs" }, h("a", { href: "#/" }, "Overview"), " / ", name,
        h("a", { href: auditHash({ queue: name }), class: "crumb-aside", id: "queue-audit" }, "audit log")),
      h("div", { class: "page-head" },
        h("h1", {}, name, " ", s.paused
          ? h("span", { class: "badge paused", id: "queue-status" }, "paused")
          : h("span", { class: "badge active", id: "queue-status" }, "active")),
        actions),
      s.paused && paused ? h("p", { class: "muted", id: "paused-by" },
        "Paused by ", h("strong", {}, paused.actor), " ", when(paused.at), ".") : null,
      h("div", { class: "split" },
        h("section", { class: "card flush" }, tabs, route.kind ? h("p", { class: "filter", id: "kind-filter" },
          "Kind ", h("code", {}, route.kind), " only · ",
          h("a", { href: `#/queues/${enc(name)}/${route.state}` }, "all kinds")) : null, deadHead, bulk, table, pages),
        h("aside", { class: "stack" }, flowCard(q), settingsCard(name, s),
          q.stats.archived > 0 ? h("p", { class: "muted", id: "archived-count" },
            `${fmtNum(q.stats.archived)} job${q.stats.archived === 1 ? "" : "s"} archived (backlog_job_archive).`) : null)),
      chartRow(hist),
    ];
  }

  // What flow control does in the queue now: the limits in force, the jobs waiting for their
  // group's turn, and the groups held up (by which job, why, how many behind it). Null when
  // the queue has neither limits nor waiting jobs.
  function flowCard(q) {
    const s = q.settings, f = q.flow;
    if (!f) return null;
    const limits = [];
    if (s.global_concurrency !== null && s.global_concurrency !== undefined) {
      limits.push(["Global concurrency", `${fmtNum(f.running)} running of ${fmtNum(s.global_concurrency)}, in every process`]);
    }
    if (s.rate_limit) limits.push(["Rate limit", s.rate_limit]);
    if (s.group_rate_limit) limits.push(["Group rate limit", s.group_rate_limit]);
    const grouped = f.waiting > 0 || f.blocked.length > 0;
    if (limits.length === 0 && !grouped) return null;
    if (grouped) limits.push(["Group concurrency", `${fmtNum(s.group_concurrency)} a group`]);
    const why = (b) => b.reason === "retry"
      ? ["failed; retries ", when(Date.parse(b.retry_at) * 1000)]
      : ["held by the group's rate limit; starts ", when(Date.parse(b.retry_at) * 1000)];
    return h("section", { class: "card flow", id: "flow" },
      h("h2", {}, "Flow control"),
      h("dl", { class: "facts" },
        limits.map(([k, v]) => [h("dt", {}, k), h("dd", {}, v)]),
        h("dt", {}, "Waiting"),
        h("dd", { id: "flow-waiting" }, f.waiting === 0 ? "none"
          : `${fmtNum(f.waiting)} job${f.waiting === 1 ? "" : "s"} in ${fmtNum(f.waiting_groups)} group${f.waiting_groups === 1 ? "" : "s"}`)),
      f.blocked.length === 0 ? null : h("table", { id: "blocked" },
        h("thead", {}, h("tr", {}, h("th", {}, "Group held up"), h("th", {}, "By"), h("th", {}, "Why"),
          h("th", { class: "num" }, "Behind"))),
        h("tbody", {}, f.blocked.map((b) => h("tr", { "data-group": b.group },
          h("td", {}, h("code", {}, b.group)),
          h("td", {}, h("a", { href: `#/jobs/${b.job_id}` }, `#${b.job_id}`)),
          h("td", {}, why(b)),
          h("td", { class: "num" }, fmtNum(b.waiting)))))));
  }

  // Every queue setting: [key, label, input type or choices, what empty means for one that may
  // be cleared (sent as null), or undefined for one that must have a value].
  const SETTINGS = [
    ["max_attempts", "Max attempts", "number"], ["backoff_base", "Backoff base", "text"],
    ["backoff_max", "Backoff max", "text"], ["lease", "Lease", "text"],
    ["order", "Order", ["fifo", "lifo"]], ["retention", "Retention", ["delete", "keep", "archive"]],
    ["concurrency", "Concurrency", "number", "worker's own"],
    ["global_concurrency", "Global concurrency", "number", "no limit"],
    ["rate_limit", "Rate limit", "text", "no limit (e.g. 100/1m)"],
    ["group_concurrency", "Group concurrency", "number"],
    ["group_on_failure", "Group on failure", ["block", "next"]],
    ["group_rate_limit", "Group rate limit", "text", "no limit (e.g. 10/1m)"],
    ["shards", "Shards", "number"],
  ];

  function settingsCard(name, s) {
    if (!isAdmin()) {
      return h("section", { class: "card" }, h("h2", {}, "Settings"),
        h("dl", { class: "facts one" }, SETTINGS.map(([k, label, , none]) => [
          h("dt", {}, label), h("dd", {}, s[k] === null ? (none || "none").replace(/ \(.*/, "") : String(s[k]))])));
    }
    const form = h("form", { class: "settings", id: "settings" },
      SETTINGS.map(([k, label, type, none]) => h("label", {},
        h("span", {}, label),
        Array.isArray(type)
          ? h("select", { name: k }, type.map((o) => h("option", { value: o, selected: s[k] === o }, o)))
          : h("input", {
            name: k, type, value: s[k] ?? "", min: type === "number" ? 1 : null,
            placeholder: none || null,
          }))),
      h("div", { class: "form-foot" },
        h("button", { type: "submit", class: "btn primary" }, "Save"),
        h("button", { type: "reset", class: "btn" }, "Reset")));
    form.addEventListener("input", () => form.setAttribute("data-dirty", ""));
    form.addEventListener("reset", () => {
      form.removeAttribute("data-dirty");
      setTimeout(() => render(false));
    });
    form.addEventListener("submit", (ev) => {
      ev.preventDefault();
      const body = {};
      for (const [k, , type, none] of SETTINGS) {
        const v = form.elements[k].value.trim();
        if (v === String(s[k] ?? "")) continue;
        if (v === "") {
          // Emptied: a setting that may be cleared goes back to its default (null); one that
          // must have a value keeps it.
          if (none !== undefined) body[k] = null;
          continue;
        }
        body[k] = type === "number" ? Number(v) : v;
      }
      if (Object.keys(body).length === 0) {
        form.removeAttribute("data-dirty");
        banner("ok", "Nothing changed");
        return;
      }
      act("configure", async () => {
        await api("PATCH", `/api/v1/queues/${enc(name)}`, body);
        form.removeAttribute("data-dirty");
        document.activeElement.blur();
      }, `Settings of ${name} saved`);
    });
    return h("section", { class: "card" }, h("h2", {}, "Settings"), form);
  }

  // ---------------------------------------------------------------------------------------
  // A job: everything about it, and the operator's actions its state allows.

  const JOB_ACTIONS = [
    // [action, label, states (as reported) that allow it, class]
    ["retry", "Retry now", ["dead", "cancelled", "completed"], "primary"],
    ["run-now", "Run now", ["scheduled", "retrying"], "primary"],
    ["release", "Release", ["held"], "primary"],
    ["hold", "Hold", ["available", "scheduled", "retrying"], ""],
    ["cancel", "Cancel", ["available", "scheduled", "retrying", "waiting", "held", "running"], "danger"],
  ];

  // A queue's max attempts, for a job that takes the queue's: read with the queue (its counts
  // too, which cost the server a count of the queue's jobs) at most once a minute, not at every
  // refresh of the job's page.
  const QUEUE_SETTINGS_MS = 60000;
  async function queueMaxAttempts(queue) {
    const seen = app.maxAttempts.get(queue);
    if (seen && performance.now() - seen.at < QUEUE_SETTINGS_MS) return seen.value;
    const q = await api("GET", `/api/v1/queues/${enc(queue)}`).catch(() => null);
    const value = q ? q.settings.max_attempts : null;
    app.maxAttempts.set(queue, { value, at: performance.now() });
    return value;
  }

  async function jobPage(route) {
    const j = await api("GET", `/api/v1/jobs/${route.id}`);
    const max = j.max_attempts ?? await queueMaxAttempts(j.queue);

    // An archived job is finished for good: no action changes it, but it can be deleted. A
    // running job cannot be deleted (cancel it first).
    const del = j.state === "running" && !j.archived ? null : h("button", {
      type: "button", class: "btn danger", "data-action": "delete",
      onclick: () => {
        if (!confirm(`Delete job ${j.id} (${j.reported_state}) of ${j.queue}? This cannot be undone.`)) return;
        act("delete", async () => {
          await api("DELETE", `/api/v1/jobs/${j.id}`);
          app.flash = `Job ${j.id} deleted`;
          location.hash = `#/queues/${enc(j.queue)}`;
        }, `Job ${j.id} deleted`);
      },
    }, "Delete");
    const actions = !isAdmin() ? null : h("div", { class: "actions" },
      j.archived ? [] : JOB_ACTIONS.filter(([a, , states]) => states.includes(j.reported_state) &&
        !(a === "cancel" && j.cancel_requested_at)).map(([a, label, , cls]) =>
        h("button", {
          type: "button", class: "btn " + cls, "data-action": a,
          onclick: () => act(a, () => api("POST", `/api/v1/jobs/${j.id}/${a}`),
            (v) => `Job ${j.id}: ${a} done, now ${v.reported_state}`),
        }, label)), del);

    const fact = (label, value) => [h("dt", {}, label), h("dd", {}, value)];
    const time = (us) => us === null || us === undefined ? "—"
      : [localTime(us), " ", h("span", { class: "muted" }, `(${relative(us)})`)];
    const facts = h("dl", { class: "facts" },
      fact("Queue", h("a", { href: `#/queues/${enc(j.queue)}` }, j.queue)),
      fact("Kind", j.kind || "—"),
      fact("State", [stateBadge(j.reported_state),
        j.reported_state !== j.state ? h("span", { class: "muted" }, ` (stored: ${j.state})`) : null,
        j.archived ? [" ", h("span", { class: "badge archived", id: "job-archived" }, "archived")] : null]),
      fact("Group", j.group ? h("span", { id: "job-group" }, h("code", {}, j.group),
        j.state === "waiting" ? h("span", { class: "muted" }, " · waits for its turn in the group") : null) : "—"),
      fact("Attempt", max ? `${j.attempt} of ${max}` : String(j.attempt)),
      fact("Priority", String(j.priority)),
      fact("Unique key", j.unique_key ? h("code", {}, j.unique_key) : "—"),
      fact("Created", time(j.created_at)),
      j.deps_left > 0 ? fact("Waits for", h("span", { id: "job-deps" },
        `${j.deps_left} job${j.deps_left === 1 ? "" : "s"} it depends on to end`)) : null,
      fact("Run at", j.state !== "waiting" ? time(j.run_at)
        : j.deps_left > 0 ? "once the jobs it depends on have ended" : "when its group's turn comes"),
      fact("Last attempt", time(j.attempted_at)),
      fact("Finished", time(j.finished_at)),
      fact("Lease owner", j.lease_owner || "—"),
      fact("Lease expires", time(j.lease_expires_at)),
      fact("Trace", j.traceparent ? h("code", { id: "job-trace", class: "wrap" }, j.traceparent) : "—"),
      j.tracestate ? fact("Trace state", h("code", { class: "wrap" }, j.tracestate)) : null);

    const json = (title, v, id) => h("section", { class: "card" }, h("h2", {}, title),
      v === null || v === undefined ? h("p", { class: "muted" }, "none")
        : h("pre", { class: "json", id }, pretty(v)));

    const errors = h("section", { class: "card" },
      h("h2", {}, "Errors ", h("small", { class: "muted" }, `${j.errors.length}`)),
      j.errors.length === 0 ? h("p", { class: "muted" }, "No failed attempt.")
        : h("table", { class: "grid-table", id: "errors" },
          h("thead", {}, h("tr", {}, h("th", { class: "num" }, "Attempt"), h("th", {}, "When"), h("th", {}, "Error"))),
          h("tbody", {}, j.errors.slice().reverse().map((e) => h("tr", {},
            h("td", { class: "num" }, e.attempt),
            h("td", { class: "nowrap" }, localTime(e.at)),
            h("td", {}, h("pre", { class: "error-text" }, e.error)))))));

    return [
      h("div", { class: "crumbs" }, h("a", { href: "#/" }, "Overview"), " / ",
        h("a", { href: `#/queues/${enc(j.queue)}` }, j.queue), " / ", `job ${j.id}`),
      h("div", { class: "page-head" },
        h("h1", {}, `Job ${j.id} `, h("span", { id: "job-state" }, stateBadge(j.reported_state))),
        actions),
      j.cancel_requested_at ? h("p", { class: "note" },
        "Cancellation was requested; the worker stops the job at its next heartbeat.") : null,
      j.archived ? h("p", { class: "note", id: "archived-note" },
        "This job was moved to the archive (the queue's retention is archive): it stays as it ended; it can only be deleted.") : null,
      h("div", { class: "split" },
        h("div", { class: "stack" }, json("Payload", j.payload, "payload"),
          json("Result", j.result, "result"), json("Progress", j.progress, "progress"), errors),
        h("aside", {}, h("section", { class: "card" }, h("h2", {}, "Details"), facts))),
    ];
  }

  // ---------------------------------------------------------------------------------------
  // The audit log: who did what, when; by queue, actor and action, newest first.

  const AUDIT_ACTIONS = [
    "job.bulk", "job.cancel", "job.delete", "job.hold", "job.release", "job.retry", "job.run_now",
    "queue.pause", "queue.redrive", "queue.resume", "queue.settings",
  ];

  const settingValue = (v) => (v === null || v === undefined ? "—" : typeof v === "object" ? JSON.stringify(v) : String(v));

  // What an entry's detail says: a settings change as "setting: before → after", one per line;
  // a redrive's count; a job action's resulting state; anything else as JSON.
  function auditDetail(e) {
    const d = e.detail || {};
    if (e.action === "queue.settings" && d.changed && typeof d.changed === "object") {
      return h("ul", { class: "changes" }, Object.entries(d.changed).map(([k, c]) =>
        h("li", { "data-setting": k }, h("code", {}, k), ": ",
          h("span", { class: "before" }, settingValue(c.before)), " → ",
          h("span", { class: "after" }, settingValue(c.after)))));
    }
    if (e.action === "queue.redrive" && "redriven" in d) return `${fmtNum(d.redriven)} redriven`;
    if (e.action === "job.bulk" && "changed" in d) {
      const which = [d.state, d.kind && `kind ${d.kind}`, d.older_than && `older than ${d.older_than}`, d.ids && `${fmtNum(d.ids)} ids`]
        .filter(Boolean).join(", ");
      return `${BULK_LABEL[d.action] || d.action}${which ? ` (${which})` : ""}: ${fmtNum(d.changed)} of ${fmtNum(d.seen)} changed`;
    }
    if (e.action === "job.delete" && typeof d.state === "string") return h("span", {}, "deleted, was ", stateBadge(d.state));
    if (typeof d.state === "string") return h("span", {}, "now ", stateBadge(d.state));
    const text = JSON.stringify(d);
    return text === "{}" ? h("span", { class: "muted" }, "—") : h("span", { class: "mono clip", title: text }, preview(d));
  }

  function auditHash(f) {
    const p = new URLSearchParams();
    for (const k of ["queue", "actor", "action"]) if (f[k]) p.set(k, f[k]);
    const q = p.toString();
    return "#/audit" + (q ? "?" + q : "");
  }

  async function auditPage(route) {
    const cur = cursorFor(`audit?${route.queue || ""}&${route.actor || ""}&${route.action || ""}`);
    const p = new URLSearchParams({ limit: String(PAGE_SIZE) });
    for (const k of ["queue", "actor", "action"]) if (route[k]) p.set(k, route[k]);
    if (cur.after) p.set("before", cur.after);
    const page = await api("GET", `/api/v1/audit?${p}`);

    const field = (name, label, input) => h("label", {}, h("span", {}, label), input);
    const form = h("form", { class: "card filters", id: "audit-filter" },
      field("queue", "Queue", h("input", { name: "queue", value: route.queue || "", placeholder: "any", autocomplete: "off" })),
      field("actor", "Actor", h("input", { name: "actor", value: route.actor || "", placeholder: "any", autocomplete: "off" })),
      field("action", "Action", h("select", { name: "action" },
        h("option", { value: "" }, "any"),
        AUDIT_ACTIONS.map((a) => h("option", { value: a, selected: a === route.action ? "" : null }, a)))),
      h("button", { type: "submit", class: "btn small" }, "Filter"),
      route.queue || route.actor || route.action ? h("a", { href: "#/audit", id: "audit-clear" }, "clear") : null);
    form.addEventListener("input", () => form.setAttribute("data-dirty", ""));
    form.addEventListener("submit", (ev) => {
      ev.preventDefault();
      const data = new FormData(form);
      const f = {};
      for (const k of ["queue", "actor", "action"]) f[k] = String(data.get(k) || "").trim();
      form.removeAttribute("data-dirty");
      location.hash = auditHash(f);
    });

    const rows = page.entries.map((e) => h("tr", { "data-audit": e.id, "data-audit-action": e.action },
      h("td", {}, when(e.at)),
      h("td", {}, h("a", { href: auditHash({ actor: e.actor }), title: "Only this actor's" }, e.actor)),
      h("td", {}, h("a", { href: auditHash({ action: e.action }), class: "mono", title: "Only this action" }, e.action)),
      h("td", {}, e.queue ? h("a", { href: `#/queues/${enc(e.queue)}` }, e.queue) : h("span", { class: "muted" }, "—")),
      h("td", { class: "num" }, e.job_id ? h("a", { href: `#/jobs/${e.job_id}` }, `#${e.job_id}`) : h("span", { class: "muted" }, "—")),
      h("td", {}, auditDetail(e))));
    const table = page.entries.length === 0
      ? h("p", { class: "empty" }, cur.after ? "No older entries." : "No recorded actions match.")
      : h("table", { class: "grid-table", id: "audit" },
        h("thead", {}, h("tr", {},
          h("th", {}, "When"), h("th", {}, "Actor"), h("th", {}, "Action"), h("th", {}, "Queue"),
          h("th", { class: "num" }, "Job"), h("th", {}, "Details"))),
        h("tbody", {}, rows));
    const pages = pager(cur, page.next, page.entries.length ? `Page ${cur.stack.length + 1}` : "",
      ["← Newer", "Older →"]);
    return [
      h("div", { class: "page-head" }, h("h1", {}, "Audit log")),
      h("p", { class: "muted" }, "Operators' actions from this dashboard, the API and the backlog command, newest first."),
      form,
      h("section", { class: "card flush" }, table, pages),
    ];
  }

  // The workers: every `backlog work` process and library worker registers itself every 5 s
  // while it runs and deletes its registration when it stops; one that stopped without saying
  // so (killed, cut off) shows as expired for an hour.
  async function workersPage() {
    const { workers } = await api("GET", "/api/v1/workers");
    const live = workers.filter((w) => !w.expired);
    const table = workers.length === 0
      ? h("p", { class: "empty" }, "No worker is running. Start one with backlog work QUEUE -- COMMAND, or a library Worker.")
      : h("table", { class: "grid-table", id: "workers" },
        h("thead", {}, h("tr", {},
          h("th", {}, "Worker"), h("th", {}, "Queues"), h("th", { class: "num" }, "Running"),
          h("th", {}, "Started"), h("th", {}, "Last seen"), h("th", {}, "State"), h("th", {}, "Version"))),
        h("tbody", {}, workers.map((w) => h("tr", { "data-worker": w.id, class: w.expired ? "expired" : "" },
          h("td", {}, h("div", { class: "strong" }, w.host), h("div", { class: "muted mono" }, `pid ${w.pid} · ${w.id}`)),
          h("td", {}, w.queues.map((q, i) => [i ? ", " : "",
            h("a", { href: `#/queues/${enc(q.queue)}`, "data-queue": q.queue }, q.queue),
            h("span", { class: "muted" }, ` ×${q.concurrency}`)])),
          h("td", { class: "num" }, fmtNum(w.running)),
          h("td", {}, when(Date.parse(w.started_at) * 1000)),
          h("td", {}, when(w.seen_at)),
          h("td", {}, w.expired
            ? h("span", { class: "badge paused", title: "No beat for 30 s: it stopped without saying so" }, "expired")
            : h("span", { class: "badge active" }, "live")),
          h("td", { class: "mono" }, w.version)))));
    return [
      h("div", { class: "page-head" }, h("h1", {}, "Workers")),
      h("p", { class: "muted", id: "workers-summary" },
        `${live.length} running` + (workers.length > live.length ? ` · ${workers.length - live.length} expired` : "") +
        ". Each writes what it runs every 5 seconds."),
      h("section", { class: "card flush" }, table),
    ];
  }

  // The periodic schedules, as their leader declares them.
  async function cronPage() {
    const { schedules } = await api("GET", "/api/v1/cron");
    const at = (t) => (t ? when(Date.parse(t) * 1000) : h("span", { class: "muted" }, "never"));
    const table = schedules.length === 0
      ? h("p", { class: "empty" }, "No periodic schedule. A worker's periodic jobs show here once its leader runs them.")
      : h("table", { class: "grid-table", id: "cron" },
        h("thead", {}, h("tr", {},
          h("th", {}, "Name"), h("th", {}, "Schedule"), h("th", {}, "Queue"), h("th", {}, "Kind"),
          h("th", {}, "Last run"), h("th", {}, "Next run"))),
        h("tbody", {}, schedules.map((c) => h("tr", { "data-cron": c.name },
          h("td", { class: "strong" }, c.name),
          h("td", { class: "mono" }, c.schedule || "—"),
          h("td", {}, c.queue ? h("a", { href: `#/queues/${enc(c.queue)}` }, c.queue) : "—"),
          h("td", {}, c.kind || h("span", { class: "muted" }, "—")),
          h("td", {}, at(c.last_run)),
          h("td", {}, c.next_run ? at(c.next_run) : h("span", { class: "muted" }, "—"))))));
    return [
      h("div", { class: "page-head" }, h("h1", {}, "Schedules")),
      h("p", { class: "muted" }, "Periodic jobs: each tick is enqueued once, by the workers' elected leader."),
      h("section", { class: "card flush" }, table),
    ];
  }

  // The newest pause of a paused queue, for "paused by … at …" (null when none is recorded:
  // paused before the audit log kept pauses, or by plain SQL).
  async function pausedBy(name) {
    const r = await api("GET", `/api/v1/audit?queue=${enc(name)}&action=queue.pause&limit=1`);
    return r.entries[0] || null;
  }

  // ---------------------------------------------------------------------------------------
  // Routing, rendering and the live refresh.

  function parseRoute() {
    const [path, query] = location.hash.replace(/^#\/?/, "").split("?");
    const params = new URLSearchParams(query || "");
    const parts = path.split("/").map((p) => {
      try {
        return decodeURIComponent(p);
      } catch (_) {
        return p;
      }
    });
    if (parts[0] === "queues" && parts[1]) {
      return {
        page: "queue", queue: parts[1], state: STATES.includes(parts[2]) ? parts[2] : "available",
        kind: params.get("kind") || null,
      };
    }
    if (parts[0] === "jobs" && /^\d+$/.test(parts[1] || "")) return { page: "job", id: parts[1] };
    if (parts[0] === "workers") return { page: "workers" };
    if (parts[0] === "cron") return { page: "cron" };
    if (parts[0] === "audit") {
      const action = params.get("action");
      return {
        page: "audit", queue: params.get("queue") || null, actor: params.get("actor") || null,
        action: AUDIT_ACTIONS.includes(action) ? action : null,
      };
    }
    return { page: "overview" };
  }

  const PAGES = {
    overview: overviewPage, queue: queuePage, job: jobPage, audit: auditPage, workers: workersPage,
    cron: cronPage,
  };

  // True while the user is typing in a form of the page, or has unsaved edits in one.
  function editing() {
    const a = document.activeElement;
    const typing = a && a.closest && a.closest("#main form") &&
      ["INPUT", "SELECT", "TEXTAREA"].includes(a.tagName);
    return Boolean(typing || document.querySelector("#main form[data-dirty]"));
  }

  async function render(navigated) {
    if (!app.me) return;
    const seq = ++app.renderSeq;
    const route = parseRoute();
    try {
      const view = await PAGES[route.page](route);
      // A newer render has started, or the user signed out meanwhile.
      if (seq !== app.renderSeq || !app.me) return;
      const main = $("main");
      main.replaceChildren(...[view].flat().filter(Boolean));
      main.setAttribute("data-page", route.page);
      if (navigated) window.scrollTo(0, 0);
      live();
    } catch (e) {
      if (seq !== app.renderSeq) return;
      if (navigated) {
        $("main").replaceChildren(h("p", { class: "empty" }, "This page could not be loaded."));
      }
      showError(e);
    }
  }

  function live() {
    const el = $("live");
    if (editing()) {
      el.className = "live paused";
      el.textContent = "paused while editing";
    } else {
      const d = new Date();
      el.className = "live";
      el.textContent = `live · ${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
    }
  }

  // The live refresh. One at a time: the next is due REFRESH_MS after this one ended, or three
  // times as long as it took when the server answers slowly, so that a slow server (counts over
  // millions of jobs) is not sent a new request before it answered the last one. A hidden tab
  // sends none; showing it again refreshes at once (visibilitychange).
  async function tick() {
    clearTimeout(app.timer);
    if (app.refreshing) return; // the refresh in flight schedules the next
    let wait = REFRESH_MS;
    if (app.me && !document.hidden && !app.busy) {
      if (editing()) {
        live();
      } else {
        app.refreshing = true;
        const started = performance.now();
        try {
          await render(false);
        } finally {
          app.refreshing = false;
        }
        const took = performance.now() - started;
        wait = Math.min(SLOWEST_REFRESH_MS, Math.max(REFRESH_MS, 3 * took));
      }
    }
    app.timer = setTimeout(tick, wait);
  }

  // ---------------------------------------------------------------------------------------
  // Signing in and out.

  function loginPage(message) {
    // A page render still waiting for its data must not draw over the sign-in form when it
    // arrives (the live refresh, or a search just before signing out).
    app.renderSeq++;
    for (const id of ["nav", "search", "who"]) $(id).hidden = true;
    const input = h("input", {
      id: "token", name: "token", type: "password", autocomplete: "off", required: true,
      placeholder: "API token", "aria-label": "API token",
    });
    const form = h("form", { class: "card login", id: "login" },
      h("h1", {}, "Sign in"),
      h("p", { class: "muted" }, "Paste an API token (made by ", h("code", {}, "backlog token new"),
        "). It stays in this browser tab only and is sent as a bearer header; no cookie is used."),
      input,
      h("button", { type: "submit", class: "btn primary" }, "Sign in"));
    form.addEventListener("submit", (ev) => {
      ev.preventDefault();
      sessionStorage.setItem(TOKEN_KEY, input.value.trim());
      identify(true);
    });
    $("main").replaceChildren(form);
    $("main").setAttribute("data-page", "login");
    if (message) banner("error", message);
    input.focus();
  }

  function signOut(message) {
    sessionStorage.removeItem(TOKEN_KEY);
    app.me = null;
    loginPage(message);
  }

  // Asks the server who we are: with the stored token, or with none (a server without tokens
  // answers `local`, an admin, and there is nothing to sign in to).
  async function identify(fromLogin) {
    try {
      app.me = await api("GET", "/api/v1/me");
    } catch (e) {
      app.me = null;
      if (e instanceof ApiError && e.status === 401) {
        const had = sessionStorage.getItem(TOKEN_KEY);
        sessionStorage.removeItem(TOKEN_KEY);
        loginPage(had || fromLogin ? "That token was refused: " + e.message : null);
      } else {
        showError(e);
      }
      return;
    }
    clearBanner();
    $("who-name").textContent = app.me.name;
    $("who-scope").textContent = app.me.scope;
    $("who-scope").className = "scope scope-" + app.me.scope;
    $("logout").hidden = !sessionStorage.getItem(TOKEN_KEY);
    for (const id of ["nav", "search", "who"]) $(id).hidden = false;
    // Signed in: the sign-in form goes at once, whatever the first page takes to load.
    $("main").replaceChildren(h("p", { class: "empty", id: "loading" }, "Loading…"));
    $("main").setAttribute("data-page", "loading");
    await render(true);
  }

  // The search box: a number is a job id; anything else a queue's name, else a unique key (the
  // newest job holding it: a key is free again once its job finishes).
  async function search(text) {
    const q = text.trim();
    if (!q) return;
    if (/^#?\d+$/.test(q)) {
      location.hash = `#/jobs/${q.replace("#", "")}`;
      return;
    }
    try {
      // One queue looked up by name, not every queue's counts read to find it.
      const isQueue = await api("GET", `/api/v1/queues/${enc(q)}`).then(() => true, (e) => {
        if (e instanceof ApiError && ["queue_not_found", "queue_name_invalid"].includes(e.code)) {
          return false;
        }
        throw e;
      });
      if (isQueue) {
        location.hash = `#/queues/${enc(q)}`;
        return;
      }
      const { jobs } = await api("GET", `/api/v1/jobs?unique_key=${enc(q)}&limit=1000`);
      if (jobs.length) {
        location.hash = `#/jobs/${jobs[jobs.length - 1].id}`;
        if (jobs.length > 1) {
          setTimeout(() => banner("ok", `${jobs.length} jobs have held the key "${q}": this is the newest`));
        }
        return;
      }
      banner("error", `Nothing found for "${q}": search a job id, a queue name or a unique key.`);
    } catch (e) {
      showError(e);
    }
  }

  function boot() {
    $("logout").addEventListener("click", () => signOut(null));
    $("banner-close").addEventListener("click", clearBanner);
    $("search").addEventListener("submit", (ev) => {
      ev.preventDefault();
      const input = $("search-input");
      search(input.value);
      input.value = "";
      input.blur();
    });
    window.addEventListener("hashchange", () => {
      // A message for the page an action moved to (a deleted job's queue), else none.
      if (app.flash) banner("ok", app.flash);
      else clearBanner();
      app.flash = null;
      render(true);
    });
    document.addEventListener("visibilitychange", tick);
    app.timer = setTimeout(tick, REFRESH_MS);
    identify(false);
  }

  // For tests and the curious: the chart code, callable on any minutes.
  window.backlogCharts = Charts;
  window.backlogText = { errorSummary, localTime };
  boot();
})();
