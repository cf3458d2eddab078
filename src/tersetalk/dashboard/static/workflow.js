// Workflow view: one row per run found under --attach, updated as its events arrive.
import { el, fmtNum, clock } from "./util.js";

const runs = new Map(); // key -> state
const $ = (id) => document.getElementById(id);

function describe(ev) {
  switch (ev.event) {
    case "run_started": return `started: ${ev.n_examples} examples (${ev.n_done} already done)`;
    case "example_started": return `example ${ev.example_id}`;
    case "message": return `${ev.sender}→${ev.receiver} ${ev.kind}, ${ev.tokens} tokens`;
    case "verdict": return ev.error ? `error: ${ev.error}` : `prediction "${String(ev.prediction ?? "").slice(0, 60)}", ${ev.correct ? "correct" : "wrong"}`;
    case "example_finished": return `example ${ev.example_id} done, ${ev.tokens} tokens`;
    case "error": return `server fault, retried next run: ${ev.error}`;
    case "stage": return `mediator ${ev.stage}`;
    case "run_finished": return `${ev.status}${ev.error ? `: ${ev.error}` : ""}`;
    default: return ev.event;
  }
}

function renderRuns() {
  const body = $("runs-body");
  const rows = [...runs.values()].sort((a, b) => (b.updated || 0) - (a.updated || 0));
  if (!rows.length) {
    body.replaceChildren(el("tr", {}, el("td", { colspan: 9, class: "muted", text: "no runs seen yet" })));
    return;
  }
  body.replaceChildren(...rows.map((r) => {
    const frac = r.n_examples ? Math.min(1, r.n_done / r.n_examples) : 0;
    const now = r.status === "running" ? (r.activity || "starting") : (r.last_error || "");
    return el("tr", { "data-run": r.key },
      el("td", {}, el("span", { class: `status ${r.status}`, text: r.status })),
      el("td", { text: r.task }), el("td", { text: r.system }), el("td", { text: r.variant }),
      el("td", {}, `${r.n_done} / ${r.n_examples}`, el("div", { class: "bar" }, el("div", { class: "bar-fill", style: { width: `${100 * frac}%` } }))),
      el("td", { text: r.n_errors + r.n_transient ? `${r.n_errors} + ${r.n_transient} retry` : "0" }),
      el("td", { text: r.n_scored ? `${r.n_correct} / ${r.n_scored}` : "–" }),
      el("td", { class: "mono", text: fmtNum(r.tokens) }),
      el("td", {}, el("div", { class: "preview", title: now, text: now })));
  }));
}

function logEvent(key, ev) {
  const list = $("wf-events");
  list.prepend(el("li", {}, el("span", { class: "muted", text: `${clock(ev.t)} ` }),
    el("span", { class: "k", text: key }), ` ${describe(ev)}`));
  while (list.children.length > 100) list.lastChild.remove();
}

export function onWorkflowSnapshot(wf) {
  if (!wf) return;
  $("wf-attached").textContent = wf.attached
    ? `following run events under ${wf.attached}/`
    : "not attached: start with `tersetalk dashboard --attach results/` to follow a running snakemake";
  runs.clear();
  for (const r of wf.runs) runs.set(r.key, r);
  renderRuns();
  $("wf-events").replaceChildren();
  for (const ev of wf.recent.slice(-100)) logEvent(ev.key, ev);
}

export function onWorkflowEvent(run, ev) {
  runs.set(run.key, run);
  renderRuns();
  logEvent(run.key, ev);
}

export function initWorkflow() {
  renderRuns();
}
