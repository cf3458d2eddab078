// Live pipeline view: the diagram lights each stage as the mediator's events arrive.
// A reload shows the last message again: its result (passes, keys, judge, delivery) comes
// from the server's history, the event log, the draft and the open panels from localStorage.
import { el, fmtNum, getJSON, pct, clock } from "./util.js";

const STORE_KEY = "tersetalk-live";
const stored = (() => {
  try { return JSON.parse(localStorage.getItem(STORE_KEY) || "{}") || {}; } catch (e) { return {}; }
})();
function save(patch) {
  Object.assign(stored, patch);
  try { localStorage.setItem(STORE_KEY, JSON.stringify(stored)); } catch (e) { /* storage off */ }
}

const ORDER = ["agent_a", "compression", "keys", "judge", "agent_b"];
const state = { mid: null, original: null, budget: null, limit: null, passes: 0,
  enabled: {}, demo: "", lastSubmitted: "" };
// The order stages lit up for the current message (read by the browser tests).
window.__stageLog = [];

const $ = (id) => document.getElementById(id);
const stageNode = (s) => document.querySelector(`.stage[data-stage="${s}"]`);
const linkInto = (s) => document.querySelector(`.link[data-link="${s}"]`);

function setTok(stage, text) {
  document.querySelector(`[data-tok="${stage}"]`).textContent = text;
  const t = document.querySelector(`[data-ttok="${stage}"]`);
  if (t) t.textContent = text === "–" ? "" : `(${text})`;
}

function resetMessage(mid) {
  state.mid = mid;
  state.original = null;
  state.passes = 0;
  window.__stageLog = [];
  for (const s of ORDER) {
    const node = stageNode(s);
    node.classList.remove("active", "done", "error", "verdict-fail");
    setTok(s, "–");
    const link = linkInto(s);
    if (link) link.classList.remove("flow", "done");
    document.querySelector(`[data-text="${s}"]`).classList.remove("lit");
  }
  $("text-compression").textContent = "–";
  $("text-agent_b").textContent = "–";
  $("keys-body").replaceChildren(el("tr", {}, el("td", { colspan: 2, class: "muted", text: "–" })));
  $("judge-result").textContent = "–";
  $("judge-result").className = "judge muted";
  $("judge-issues").replaceChildren();
  $("timeline-body").replaceChildren(el("tr", {}, el("td", { colspan: 4, class: "muted", text: "no passes yet" })));
  setRatio(null);
  flagDelivery(null);
}

// A delivered message over the budget is flagged whatever the judge said.
function flagDelivery(tokens, original, judgePassed) {
  const over = tokens !== null && tokens !== undefined && state.budget !== null && tokens > state.budget;
  const flag = $("delivery-flag");
  flag.hidden = !over;
  $("delivery-badge").hidden = !over;
  stageNode("agent_b").classList.toggle("over-budget", over);
  if (!over) { flag.textContent = ""; return; }
  const inText = original === null || original === undefined ? "" : `${original} tokens in, `;
  const judge = judgePassed ? " (the judge passed it)" : "";
  flag.textContent = `Over budget: ${inText}${tokens} delivered, budget ${state.budget}${judge}`;
}

// Light `stage`: the one before it is done, the link into it flows.
function light(stage) {
  if (window.__stageLog.includes(stage)) return;
  for (const s of ORDER) {
    const node = stageNode(s);
    if (node.classList.contains("active")) {
      node.classList.remove("active");
      node.classList.add("done");
      const link = linkInto(s);
      if (link) { link.classList.remove("flow"); link.classList.add("done"); }
    }
  }
  stageNode(stage).classList.add("active");
  const link = linkInto(stage);
  if (link) link.classList.add("flow");
  document.querySelector(`[data-text="${stage}"]`).classList.add("lit");
  window.__stageLog.push(stage);
}

function finishAll() {
  for (const s of ORDER) {
    const node = stageNode(s);
    if (node.classList.contains("active")) { node.classList.remove("active"); node.classList.add("done"); }
    const link = linkInto(s);
    if (link && link.classList.contains("flow")) { link.classList.remove("flow"); link.classList.add("done"); }
  }
}

function setRatio(ratio) {
  const bar = $("ratio-bar");
  bar.style.width = ratio === null ? "0" : `${Math.min(100, 100 * ratio)}%`;
  $("ratio-text").textContent = ratio === null ? "–" : `${pct(ratio)} of the original`;
  $("m-ratio").textContent = ratio === null ? "–" : pct(ratio);
  $("m-ratio-bar").style.width = ratio === null ? "0" : `${Math.min(100, 100 * ratio)}%`;
}

function setBudget(tokens) {
  if (state.budget === null || tokens === null || tokens === undefined) {
    $("m-budget").textContent = state.budget === null ? "–" : `– / ${state.budget}`;
    $("m-budget-bar").style.width = "0";
    return;
  }
  $("m-budget").textContent = `${tokens} / ${state.budget} tokens`;
  const bar = $("m-budget-bar");
  bar.style.width = `${Math.min(100, (100 * tokens) / state.budget)}%`;
  bar.classList.toggle("over", tokens > state.budget);
}

function setPasses(n) {
  $("m-passes").textContent = `${n} / ${state.limit ?? "–"}`;
}

function addTimelineRow(d) {
  const body = $("timeline-body");
  if (state.passes === 0) body.replaceChildren();
  state.passes += 1;
  const width = state.original ? Math.max(2, Math.round((120 * d.output_tokens) / state.original)) : 0;
  body.append(el("tr", { "data-pass": d.index },
    el("td", { text: `#${d.index}` }),
    el("td", {}, `${d.input_tokens} → ${d.output_tokens} `, el("span", { class: "tbar", style: { width: `${width}px` } })),
    el("td", { class: "mono", text: fmtNum(d.ratio, 2) }),
    el("td", { class: d.accepted ? "" : "rejected", text: d.accepted ? "kept" : "rejected" })));
}

function renderKeys(keys) {
  const body = $("keys-body");
  if (!keys.length) {
    body.replaceChildren(el("tr", {}, el("td", { colspan: 2, class: "muted", text: "no keys extracted" })));
    return;
  }
  body.replaceChildren(...keys.map((k) => el("tr", {}, el("td", { text: k.type }), el("td", { text: k.value }))));
}

function renderJudge(d) {
  const box = $("judge-result");
  box.className = `judge ${d.passed ? "pass" : "fail"}`;
  const conf = d.confidence === undefined ? "" : `, confidence ${fmtNum(d.confidence, 3)}`;
  box.textContent = `${d.passed ? "PASS" : "FAIL"} (${d.judge || "judge"}${conf})`;
  const issues = d.issues || [];
  $("judge-issues").replaceChildren(...(issues.length ? issues.map((i) => el("li", { text: i }))
    : [el("li", { class: "muted", text: "no issues found" })]));
  setTok("judge", d.passed ? "pass" : "fail");
  stageNode("judge").classList.toggle("verdict-fail", !d.passed);
}

function showEvent(ev) {
  const list = $("event-log");
  const d = ev.data || {};
  const bits = Object.entries(d).filter(([k, v]) => typeof v !== "object" && k !== "text")
    .slice(0, 5).map(([k, v]) => `${k}=${v}`).join(" ");
  list.prepend(el("li", {}, el("span", { class: "muted", text: `${clock(ev.timestamp)} ` }),
    el("span", { class: "k", text: ev.event }), ` ${bits}`));
  while (list.children.length > 60) list.lastChild.remove();
}

function logEvent(ev) {
  showEvent(ev);
  const d = ev.data || {};
  const slim = Object.fromEntries(Object.entries(d).filter(([k, v]) => typeof v !== "object" && k !== "text"));
  save({ events: [...(stored.events || []), { event: ev.event, timestamp: ev.timestamp, data: slim }].slice(-60) });
}

function onPipelineEvent(ev) {
  const d = ev.data || {};
  if (ev.message_id && ev.message_id !== state.mid) resetMessage(ev.message_id);
  logEvent(ev);
  switch (ev.event) {
    case "message_received":
      state.original = d.tokens;
      light("agent_a");
      setTok("agent_a", `${d.tokens} tok`);
      $("text-agent_a").textContent = state.lastSubmitted || "(sent from another window)";
      setBudget(d.tokens);
      setPasses(0);
      break;
    case "compression_start":
      light("compression");
      state.budget = d.budget ?? state.budget;
      setBudget(d.tokens);
      break;
    case "compression_pass":
      addTimelineRow(d);
      if (d.accepted) {
        setTok("compression", `${d.output_tokens} tok`);
        setRatio(state.original ? d.output_tokens / state.original : null);
        setBudget(d.output_tokens);
      }
      setPasses(state.passes);
      break;
    case "compression_complete":
      setTok("compression", `${d.final_tokens} tok`);
      setRatio(d.original_tokens ? d.final_tokens / d.original_tokens : 1);
      setBudget(d.final_tokens);
      setPasses(d.passes);
      if (!d.passes) $("text-compression").textContent = `${$("text-agent_a").textContent}\n(within budget: not compressed)`;
      break;
    case "stage_text":
      if (d.stage === "compression") $("text-compression").textContent = d.text;
      if (d.stage === "keys") renderKeys(d.keys || []);
      break;
    case "extraction_start":
      light("keys");
      break;
    case "extraction_complete":
      setTok("keys", `${d.n_keys} keys`);
      break;
    case "judge_start":
      light("judge");
      break;
    case "judge_complete":
      renderJudge(d);
      break;
    case "pipeline_complete":
      light("agent_b");
      setTok("agent_b", `${d.delivered_tokens} tok`);
      flagDelivery(d.delivered_tokens, state.original, null);
      finishAll();
      break;
    case "pipeline_error": {
      const active = document.querySelector(".stage.active");
      if (active) { active.classList.remove("active"); active.classList.add("error"); }
      $("send-note").textContent = `error in ${d.stage}: ${d.message || d.error_type || ""}`;
      break;
    }
    default:
      break;
  }
}

function onResult(rec, stats) {
  if (rec.message_id === state.mid || state.mid === null) {
    state.mid = rec.message_id;
    $("text-agent_a").textContent = rec.original.text;
    setTok("agent_a", `${rec.original.tokens} tok`);
    if (rec.compression) $("text-compression").textContent = rec.compression.final_text;
    if (rec.extraction) renderKeys(rec.extraction.keys || []);
    if (rec.judge) renderJudge(rec.judge);
    $("text-agent_b").textContent = rec.delivered.text || "–";
    if (rec.delivered.text) setTok("agent_b", `${rec.delivered.tokens} tok`);
    const c = rec.compression;
    if (c) {
      state.original = c.original_tokens ?? rec.original.tokens;
      setTok("compression", `${c.final_tokens} tok`);
      setRatio(c.original_tokens ? c.final_tokens / c.original_tokens : null);
      setBudget(c.final_tokens);
      if (state.passes === 0 && (c.passes || []).length) for (const p of c.passes) addTimelineRow(p);
      setPasses(c.n_passes ?? state.passes);
    }
    if (rec.extraction) setTok("keys", `${(rec.extraction.keys || []).length} keys`);
    if (rec.delivered.text) flagDelivery(rec.delivered.tokens, rec.original.tokens, rec.judge ? rec.judge.passed : null);
    save({ mid: rec.message_id, submitted: rec.original.text });
  }
  renderStats(stats);
}

function renderStats(s) {
  if (!s) return;
  $("m-messages").textContent = fmtNum(s.messages);
  $("m-mean-ratio").textContent = s.messages ? pct(s.mean_ratio) : "–";
  $("m-agg-ratio").textContent = s.messages ? pct(s.aggregate_ratio) : "–";
  $("m-judge").textContent = s.judged ? `${s.judge_passed} / ${s.judged}` : "–";
}

function setStatus(status, pending) {
  const pill = $("live-status");
  pill.textContent = pending > 1 ? `${status} (${pending} queued)` : status;
  pill.classList.toggle("busy", status !== "idle");
  $("send-button").disabled = false;
}

function renderConfig(cfg) {
  const box = $("stage-config");
  const titles = { compression: "Stage 1 · compression", keys: "Stage 2 · semantic keys",
    judge: "Judge", delivery: "Delivery to Agent B" };
  box.replaceChildren(...Object.entries(cfg).map(([name, values]) => {
    const dl = el("dl");
    for (const [k, v] of Object.entries(values)) {
      dl.append(el("dt", { text: k }), el("dd", { text: typeof v === "object" ? JSON.stringify(v) : String(v) }));
    }
    const on = values.enabled === undefined ? "" : values.enabled ? " (on)" : " (off)";
    const block = el("details", { class: "config-block", "data-config": name,
      open: (stored.open || []).includes(name) }, el("summary", { text: `${titles[name] || name}${on}` }), dl);
    block.addEventListener("toggle", () => {
      const open = new Set(stored.open || []);
      if (block.open) open.add(name); else open.delete(name);
      save({ open: [...open] });
    });
    return block;
  }));
}

export function onLiveSnapshot(live) {
  if (!live) return;
  state.budget = live.budget;
  state.limit = live.recursion_limit;
  state.demo = live.demo_message || "";
  for (const s of live.stages) {
    state.enabled[s.id] = s.enabled;
    stageNode(s.id).classList.toggle("disabled", !s.enabled);
  }
  $("live-model").textContent = `model: ${live.model}`;
  renderConfig(live.config);
  renderStats(live.stats);
  setStatus(live.status, live.pending);
  setBudget(null);
  setPasses(0);
  const last = live.history && live.history[live.history.length - 1];
  if (last && state.mid === null) {
    resetMessage(last.message_id);
    onResult(last, live.stats);
    for (const s of ORDER) if (state.enabled[s]) stageNode(s).classList.add("done");
    // the events of before the reload, if they are of this server's messages
    if (!$("event-log").children.length && live.history.some((h) => h.message_id === stored.mid)) {
      for (const ev of stored.events || []) showEvent(ev);
    }
  }
}

export function onLiveMessage(msg) {
  if (msg.type === "pipeline") onPipelineEvent(msg.event);
  else if (msg.type === "pipeline_result") onResult(msg.result, msg.stats);
  else if (msg.type === "live_status") {
    setStatus(msg.status, msg.pending);
    if (msg.model) $("live-model").textContent = `model: ${msg.model}`;
  }
}

export function initLive() {
  $("send-form").addEventListener("submit", async (e) => {
    e.preventDefault();
    const text = $("message-input").value;
    if (!text.trim()) { $("send-note").textContent = "write a message first"; return; }
    state.lastSubmitted = text;
    $("send-note").textContent = "queued…";
    try {
      const res = await getJSON("/api/live/message", { method: "POST",
        headers: { "Content-Type": "application/json" }, body: JSON.stringify({ message: text }) });
      $("send-note").textContent = `message ${res.message_id} queued`;
    } catch (err) {
      $("send-note").textContent = `not sent: ${err.message}`;
    }
  });
  $("demo-button").addEventListener("click", () => {
    $("message-input").value = state.demo;
    save({ draft: state.demo });
  });
  if (stored.draft) $("message-input").value = stored.draft;
  $("message-input").addEventListener("input", () => save({ draft: $("message-input").value }));
}
