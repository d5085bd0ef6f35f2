// foldstream inspector: plain JS, no build step. Every value from the
// server is inserted with textContent (never as HTML): transcripts are
// untrusted input.
"use strict";

const state = {
  cfg: null, q: "", sessOffset: 0, sessLimit: 50, sessTotal: 0,
  session: null, tab: "timeline",
  kinds: new Set(["turns", "notes", "summaries", "events", "skips", "rejected", "memories", "evictions", "warnings"]),
  offset: 0, limit: 200, total: 0, atEnd: true, es: null, refreshTimer: null,
};
const GROUPS = ["turns", "notes", "summaries", "events", "skips", "rejected", "memories", "evictions", "warnings"];

function $(id) { return document.getElementById(id); }
function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "class") e.className = v; else if (k === "text") e.textContent = v; else e.setAttribute(k, v);
  }
  for (const c of kids) if (c !== null && c !== undefined) e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return e;
}
async function api(path, opts) {
  const r = await fetch(path, opts);
  const body = await r.json().catch(() => ({ error: r.status + " " + r.statusText }));
  if (!r.ok) throw new Error(body.error || r.statusText);
  return body;
}
function fmtTime(s) {
  if (!s) return "";
  const d = new Date(s);
  return d.toISOString().slice(11, 23);
}
function fmtLag(lag) {
  if (!lag) return "0";
  const s = lag.seconds;
  return s < 1 ? s.toFixed(2) + "s" : s < 120 ? s.toFixed(1) + "s" : Math.round(s / 60) + "m";
}
// n shows a number the wire format omits when it is zero.
function n(v) { return v ?? 0; }
function redacted() { return el("span", { class: "muted", text: "(text hidden)" }); }

// ---- session list ----
async function loadSessions() {
  const p = new URLSearchParams({ q: state.q, offset: state.sessOffset, limit: state.sessLimit });
  let list;
  try { list = await api("/api/sessions?" + p); } catch (e) { $("session-count").textContent = e.message; return; }
  state.sessTotal = list.total;
  $("session-count").textContent = list.total + " session" + (list.total === 1 ? "" : "s");
  const tb = $("sessions");
  tb.replaceChildren();
  for (const r of list.sessions) {
    const lease = r.lease ? (r.lease.held ? "fold " + r.lease.from + "–" + r.lease.to : "expired") : "";
    const tr = el("tr", { "data-session": r.session, class: r.session === state.session ? "sel" : "" },
      el("td", { class: "id", title: r.session, text: r.session }),
      el("td", { text: r.mode + (r.ended ? " (ended)" : "") }),
      el("td", { class: "num", text: r.turns }),
      el("td", { class: "num", text: r.cursor }),
      el("td", { class: "num", text: r.version }),
      el("td", { class: "num" + (r.lag && r.lag.seconds > 5 ? " warn" : ""), title: r.lag ? "oldest event after the checkpoint: seq " + r.lag.seq : "checkpoint covers the stream", text: fmtLag(r.lag) }),
      el("td", { text: lease }),
      el("td", { class: "num" + (r.failures ? " bad" : ""), title: r.retry_after ? "retry after " + r.retry_after : (r.error || ""), text: r.failures || (r.error ? "!" : "") }));
    tr.addEventListener("click", () => { location.hash = "s=" + encodeURIComponent(r.session); });
    tb.append(tr);
  }
  const pages = Math.max(1, Math.ceil(list.total / state.sessLimit));
  $("sess-page").textContent = (Math.floor(state.sessOffset / state.sessLimit) + 1) + " / " + pages;
}

// ---- session detail ----
async function loadHead() {
  const id = state.session;
  let d;
  try { d = await api("/api/sessions/" + encodeURIComponent(id)); } catch (e) { $("head").replaceChildren(el("p", { class: "error", text: e.message })); return; }
  const r = d.row, t = d.totals, s = d.service;
  const kv = (k, v, cls) => el("span", { class: "kv " + (cls || "") }, k + " ", el("b", { text: v }));
  const head = $("head");
  head.replaceChildren(el("h2", { text: id }),
    kv("mode", r.mode), kv("turns", r.turns), kv("cursor", r.cursor), kv("summary", "v" + r.version + " · " + r.summary_chars + " chars"),
    kv("lag", fmtLag(r.lag), r.lag && r.lag.seconds > 5 ? "warn" : ""),
    kv("lease", r.lease ? (r.lease.held ? r.lease.fold_id + " [" + r.lease.from + "," + r.lease.to + ") until " + fmtTime(r.lease.deadline) : "expired") : "none"),
    kv("pending notes", r.pending_notes),
    kv("folds", t.folds_completed + " done / " + t.folds_failed + " failed"),
    kv("rejected", t.dead_letters, t.dead_letters ? "bad" : ""),
    kv("failures", r.failures || 0, r.failures ? "bad" : ""));
  if (d.last_failure) {
    const f = d.last_failure;
    head.append(el("span", { class: "kv bad", id: "last-failure" }, "last failure ", el("b", { text: fmtTime(f.at) + " " + (f.error_class || "") + (f.retryable ? " (retryable)" : "") + (f.error ? ": " + f.error : "") })));
  }
  if (s) head.append(kv("service", s.caught_up ? "caught up" : n(s.pending_events) + " events pending", s.caught_up ? "" : "warn"));
  if (d.service_error) head.append(el("span", { class: "kv warn", text: "session service: " + d.service_error }));
  else if (s && s.version !== r.version) head.append(el("span", { class: "kv warn", text: "service reports v" + s.version }));
  if (t.warnings && t.warnings.length) head.append(el("span", { class: "kv warn", text: t.warnings.length + " warning(s) in the timeline" }));
}

function buildFilters() {
  const f = $("filters");
  f.replaceChildren();
  for (const g of GROUPS) {
    const cb = el("input", { type: "checkbox", "data-group": g });
    cb.checked = state.kinds.has(g);
    cb.addEventListener("change", () => {
      if (cb.checked) state.kinds.add(g); else state.kinds.delete(g);
      state.atEnd = false; state.offset = 0; loadTimeline();
    });
    f.append(el("label", {}, cb, " " + g, el("span", { class: "muted", "data-count": g })));
  }
}

async function loadTimeline(tail) {
  const id = state.session;
  const p = new URLSearchParams({ offset: state.offset, limit: state.limit });
  if (state.kinds.size < GROUPS.length) p.set("kinds", [...state.kinds].join(","));
  if (tail) p.set("tail", "1");
  let page;
  try { page = await api("/api/sessions/" + encodeURIComponent(id) + "/timeline?" + p); }
  catch (e) { $("timeline").replaceChildren(el("li", { class: "error", text: e.message })); return; }
  if (id !== state.session) return;
  state.offset = page.offset; state.total = page.total;
  state.atEnd = page.offset + page.items.length >= page.total;
  for (const g of GROUPS) {
    const c = document.querySelector('[data-count="' + g + '"]');
    if (c) c.textContent = " (" + (page.counts[g] || 0) + ")";
  }
  const pages = Math.max(1, Math.ceil(page.total / state.limit));
  $("tl-page").textContent = "entries " + (page.total ? page.offset + 1 : 0) + "–" + (page.offset + page.items.length) + " of " + page.total + " · page " + (Math.floor(page.offset / state.limit) + 1) + "/" + pages;
  const ol = $("timeline");
  const frag = document.createDocumentFragment();
  let lastFold = null;
  for (const it of page.items) {
    if (it.kind === "turn" && it.turn) {
      const fb = it.folded_by || 0;
      if (fb !== lastFold && (lastFold !== null || fb > 0)) frag.append(boundary(fb));
      lastFold = fb;
    }
    frag.append(renderItem(it));
  }
  ol.replaceChildren(frag);
}

// boundary marks where consecutive turns belong to different folds (and,
// at the top of a page, which fold its first turns belong to).
function boundary(cur) {
  let text;
  if (cur === 0) text = "cursor: verbatim from here (the recent window)";
  else text = "fold boundary: turns below were folded into summary v" + cur;
  return el("li", { class: "boundary" }, el("div", { class: "fold-boundary", text }));
}

function diffNode(ops) {
  const d = el("div", { class: "diff" });
  for (const op of ops) {
    const tag = op.op === "+" ? "ins" : op.op === "-" ? "del" : "span";
    d.append(el(tag, { text: op.text }), " ");
  }
  return d;
}

function renderItem(it) {
  const row = (cls, kind, ...body) => el("li", { class: cls, "data-n": it.n }, el("span", { class: "t", title: it.time, text: fmtTime(it.time) }), el("span", { class: "k", text: kind }), el("div", { class: "x" }, ...body));
  const inv = it.invalid ? el("span", { class: "bad", text: " [invalid: " + it.invalid + "]" }) : null;
  switch (it.kind) {
    case "turn": {
      const t = it.turn;
      if (!t) return row("turn", "turn", "(undecodable)", inv);
      const idx = t.index >= 0 ? "#" + t.index : "#–";
      return row("turn" + (it.folded_by ? " folded" : ""), "turn",
        el("span", { class: "meta", title: "turn_id " + t.turn_id + " · said at " + t.at, text: idx + " " }),
        el("span", { class: "sp", text: t.speaker }), el("span", { class: "meta", text: " (" + t.role + (t.kind ? ", " + t.kind : "") + ") " }),
        it.redacted ? redacted() : t.text,
        t.duplicate ? el("span", { class: "warn", text: " [duplicate turn_id, not counted]" }) : null, inv);
    }
    case "note": {
      const n = it.note;
      if (!n) return row("note", "note", "(undecodable)", inv);
      return row("note", "note", el("span", { class: "meta", text: (n.source ? "[" + n.source + "] " : "") }), it.redacted ? redacted() : n.text, inv);
    }
    case "control":
      return row("control", "control", it.control ? it.control.op + (it.control.config ? " " + JSON.stringify(it.control.config) : "") : "(undecodable)", inv);
    case "summary": {
      const s = it.summary;
      if (!s) return row("summary", "summary", "(undecodable summary)", inv);
      const meta = "v" + s.version + " · turns " + n(s.folded_from) + "–" + n(s.covered_through_turn) + " → cursor " + n(s.cursor) +
        " · " + n(s.summary_chars) + " chars · tier " + (s.tier || "–") + " · model " + (s.model || "–") + " · " + n(s.latency_ms) + " ms" +
        (s.folded_notes ? " · " + s.folded_notes + " notes" : "") + (it.prev_version ? " · diff against v" + it.prev_version : " · first version");
      return row("summary", "summary v" + s.version, el("div", { class: "meta", text: meta }), it.diff ? diffNode(it.diff) : (it.redacted ? redacted() : s.summary),
        it.warning ? el("div", { class: "warn", text: it.warning }) : null);
    }
    case "compaction_started": {
      const e = it.event;
      return row("started", "fold start", "fold " + (e.fold_id || "") + " turns " + n(e.batch_from) + "–" + n(e.batch_to) + " · trigger " + (e.trigger || "–") + (e.cause ? " (" + e.cause + ")" : "") + " · cursor " + n(e.cursor) + " of " + n(e.total_turns) + (e.pending_note_count ? " · " + e.pending_note_count + " notes" : ""));
    }
    case "compaction_completed": {
      const e = it.event;
      return row("completed", "fold done", el("span", { class: "cursor-move", text: "cursor " + n(e.old_cursor) + " → " + n(e.new_cursor) }), " · v" + n(e.version) + " · " + n(e.summary_chars) + " chars · tier " + (e.tier || "–") + " · " + n(e.latency_ms) + " ms");
    }
    case "compaction_failed": {
      const e = it.event;
      return row("failed", "fold failed", (e.error_class || "–") + (e.retryable ? " (retryable)" : "") + " · model " + (e.model || "–") + " · turns " + n(e.batch_from) + "–" + n(e.batch_to) + (e.error ? ": " + e.error : ""));
    }
    case "compaction_skipped": {
      const e = it.event;
      return row("skip", "skip", el("span", { class: "reason", text: e.reason || "unspecified" }), " · cursor " + n(e.cursor) + " of " + n(e.total_turns) + (e.eligible ? " · eligible " + e.eligible : ""));
    }
    case "rejected": {
      const r = it.rejected;
      return row("rejected", "rejected", el("b", { class: "code", text: r.code || "–" }), r.field ? el("span", { class: "field", text: " field " + r.field }) : null, ": " + r.reason,
        r.original_subject ? el("span", { class: "meta", text: " (from " + r.original_subject + " seq " + (r.original_seq || "–") + ")" }) : null,
        it.raw || it.payload ? el("div", { class: "meta", text: it.raw ? JSON.stringify(it.raw) : it.payload }) : null);
    }
    case "warning":
      return row("warning", "warning", it.warning);
    case "memory":
      if (it.memory) return memoryRow(row, it.memory, it.redacted);
      return row("memory", "memory", it.redacted ? redacted() : JSON.stringify(it.raw || it.payload || ""), inv);
    case "evicted":
      return row(it.kind, it.kind, it.redacted ? redacted() : JSON.stringify(it.raw || it.payload || ""));
  }
  if (it.event) {
    const e = it.event;
    return row("event", e.type.replace("session_", ""), (e.reason ? e.reason + " · " : "") + "cursor " + n(e.cursor) + " of " + n(e.total_turns));
  }
  return row("unknown", it.kind, inv, it.raw ? JSON.stringify(it.raw) : it.payload || "");
}

// memoryRow shows a memory event as its facts: who said each, in which
// turn and when, and the earlier fact it replaces.
function memoryRow(row, m, hidden) {
  const list = el("ul", { class: "mems" });
  for (const f of m.items) {
    const said = [f.at ? "said " + new Date(f.at).toISOString().slice(0, 16).replace("T", " ") + " UTC" : null,
      f.turn_id ? "turn " + f.turn_id : null].filter(Boolean).join(", ");
    list.append(el("li", { class: "mem", "data-id": f.id || null },
      f.speaker ? el("span", { class: "sp", text: f.speaker + ": " }) : null,
      hidden ? redacted() : el("span", { class: "mem-text", text: f.text }),
      said ? el("span", { class: "meta when", text: " (" + said + ")" }) : null,
      f.supersedes ? el("div", { class: "supersedes", title: "replaces memory " + f.supersedes },
        "replaces: ", f.replaces ? el("s", { text: f.replaces }) : hidden ? redacted() : el("span", { class: "meta", text: "memory " + f.supersedes })) : null));
  }
  const meta = "v" + n(m.version) + " · " + m.items.length + " fact" + (m.items.length === 1 ? "" : "s") + (m.model ? " · model " + m.model : "");
  return row("memory", "memory", el("div", { class: "meta", text: meta }), list);
}

// ---- context ----
function renderContext(c) {
  const box = el("div", { class: "ctx" });
  box.append(el("div", { class: "meta", text: c.chars + " chars · " + c.tokens + " tokens · cursor " + c.cursor + " of " + c.total_turns +
    " · " + c.turns.length + " verbatim turns" + (c.dropped_turns ? " (" + c.dropped_turns + " dropped by the budget)" : "") +
    (c.summary ? " · summary v" + c.summary.version : c.summary_dropped ? " · summary dropped by the budget" : " · no summary") +
    (c.fold_in_flight ? " · fold in flight" : "") }));
  if (c.redacted) box.append(el("p", {}, redacted()));
  else box.append(el("pre", { class: "prompt", text: c.prompt || "" }));
  return box;
}

async function getContext(ev) {
  ev && ev.preventDefault();
  const f = new FormData($("ctx-form"));
  const p = new URLSearchParams();
  for (const [k, v] of f) if (v !== "" && v !== "0") p.set(k, v);
  const out = $("ctx-out");
  out.replaceChildren(el("p", { class: "muted", text: "asking the context service…" }));
  try { out.replaceChildren(renderContext(await api("/api/sessions/" + encodeURIComponent(state.session) + "/context?" + p))); }
  catch (e) { out.replaceChildren(el("p", { class: "error", text: e.message })); }
}

// ---- what-if ----
function renderSide(title, s) {
  const box = el("div", { class: "side" }, el("h3", { text: title }));
  const last = s.summaries[s.summaries.length - 1];
  box.append(el("div", { class: "meta", text: s.summaries.length + " summary versions · " + s.totals.folds_completed + " folds · cursor " + s.totals.cursor }));
  if (s.context) box.append(el("h4", { text: "context now" }), renderContext(s.context));
  else if (s.context_error) box.append(el("p", { class: "error", text: s.context_error }));
  box.append(el("h4", { text: "summary versions" }));
  for (const v of s.summaries.slice().reverse()) {
    const d = el("details", { class: "ver" }, el("summary", { text: "v" + v.version + " · turns " + v.folded_from + "–" + (v.cursor - 1) + " · " + v.chars + " chars · " + v.tier + " · " + v.model + " · " + v.latency_ms + " ms" }));
    if (v.diff) d.append(diffNode(v.diff));
    if (v === last) d.open = true;
    box.append(d);
  }
  return box;
}

async function runWhatIf(ev) {
  ev.preventDefault();
  const f = new FormData($("wi-form"));
  const body = {};
  for (const [k, v] of f) {
    if (v === "") continue;
    body[k] = ["recent_window", "batch_size", "max_summary_chars", "budget_chars"].includes(k) ? Number(v) : v;
  }
  const out = $("wi-out");
  out.replaceChildren(el("p", { class: "muted", text: "refolding in a scratch server…" }));
  try {
    const r = await api("/api/sessions/" + encodeURIComponent(state.session) + "/whatif", { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) });
    const s = r.settings;
    const res = el("div", { id: "whatif-result" },
      el("p", { class: "meta", text: r.events + " inbound events replayed in " + r.took_ms + " ms · mode " + s.mode + " · window " + s.recent_window + " · batch " + s.batch_size + " · summary ≤ " + s.max_summary_chars + " chars · summarizer " + s.summarizer + (r.settled ? "" : " · NOT SETTLED") }));
    for (const w of r.warnings || []) res.append(el("p", { class: "warn", text: w }));
    if (r.compare) res.append(el("details", { class: "compare", open: "" }, el("summary", { text: "latest summary: real → what-if (struck out: only in the real one; highlighted: only in the what-if)" }), diffNode(r.compare)));
    res.append(el("div", { class: "sides" }, renderSide("real", r.real), renderSide("what-if", r.whatif)));
    out.replaceChildren(res);
  } catch (e) { out.replaceChildren(el("p", { class: "error", text: e.message })); }
}

// ---- live ----
function connectLive() {
  if (state.es) state.es.close();
  const es = new EventSource("/api/sessions/" + encodeURIComponent(state.session) + "/live");
  state.es = es;
  es.onopen = () => $("live").classList.add("on");
  es.onerror = () => $("live").classList.remove("on");
  const onEvent = () => {
    clearTimeout(state.refreshTimer);
    state.refreshTimer = setTimeout(() => {
      loadHead();
      if (state.atEnd) loadTimeline(true);
      loadSessions();
    }, 300);
  };
  for (const t of ["in", "out", "dlq"]) es.addEventListener(t, onEvent);
}

// ---- routing ----
function showTab(name) {
  state.tab = name;
  for (const b of document.querySelectorAll(".tabs button")) b.classList.toggle("active", b.dataset.tab === name);
  for (const t of ["timeline", "context", "whatif"]) $("tab-" + t).classList.toggle("hidden", t !== name);
}

function route() {
  const m = /^#s=(.+)$/.exec(location.hash);
  const id = m ? decodeURIComponent(m[1]) : null;
  if (!id) { $("detail").classList.add("hidden"); $("empty").classList.remove("hidden"); return; }
  if (id === state.session) return;
  state.session = id; state.offset = 0;
  $("empty").classList.add("hidden"); $("detail").classList.remove("hidden");
  $("ctx-out").replaceChildren(); $("wi-out").replaceChildren();
  for (const tr of document.querySelectorAll("#sessions tr")) tr.classList.toggle("sel", tr.dataset.session === id);
  loadHead(); loadTimeline(true); connectLive();
}

async function init() {
  try {
    state.cfg = await api("/api/config");
    $("textmode").textContent = state.cfg.text ? "" : "transcript text hidden for this reader";
    const sel = document.querySelector('#wi-form select[name="summarizer"]');
    for (const n of state.cfg.summarizers.sort()) sel.append(el("option", { value: n, text: n }));
    const d = state.cfg.defaults, f = $("wi-form");
    f.recent_window.placeholder = d.recent_window; f.batch_size.placeholder = d.batch_size; f.max_summary_chars.placeholder = d.max_summary_chars;
    f.mode.options[0].textContent = "(" + d.mode + ")";
    for (const m of state.cfg.modes) f.mode.append(el("option", { value: m, text: m }));
  } catch (e) { $("conn").textContent = e.message; }
  buildFilters();
  let t;
  $("search").addEventListener("input", (e) => { clearTimeout(t); t = setTimeout(() => { state.q = e.target.value; state.sessOffset = 0; loadSessions(); }, 200); });
  $("sess-prev").onclick = () => { state.sessOffset = Math.max(0, state.sessOffset - state.sessLimit); loadSessions(); };
  $("sess-next").onclick = () => { if (state.sessOffset + state.sessLimit < state.sessTotal) { state.sessOffset += state.sessLimit; loadSessions(); } };
  $("tl-first").onclick = () => { state.offset = 0; loadTimeline(); };
  $("tl-prev").onclick = () => { state.offset = Math.max(0, state.offset - state.limit); loadTimeline(); };
  $("tl-next").onclick = () => { if (state.offset + state.limit < state.total) { state.offset += state.limit; loadTimeline(); } };
  $("tl-last").onclick = () => loadTimeline(true);
  for (const b of document.querySelectorAll(".tabs button")) b.onclick = () => showTab(b.dataset.tab);
  $("ctx-form").addEventListener("submit", getContext);
  $("wi-form").addEventListener("submit", runWhatIf);
  window.addEventListener("hashchange", route);
  await loadSessions();
  route();
}
init();
