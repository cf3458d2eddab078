// Workflow view: Snakemake's progress over every job (from its own log), and one row per
// run found under --attach, grouped by study (main, calibration, topology, formats,
// sensitivity) and sorted, updated as its events arrive.
import { el, fmtNum, clock } from "./util.js";

const runs = new Map(); // key -> state
let calibration = {}; // system -> grid point -> settings (from the workflow's config)
let sensitivity = []; // the results keys of the sensitivity study's models
let jobs = null; // Snakemake's jobs and progress
const $ = (id) => document.getElementById(id);
const STUDIES = ["main", "calibration", "topology", "formats", "sensitivity"];

// The study of a run from its key (its event file's path under the attached folder):
// [<model>/]runs/..., [<model>/]calibration/runs/..., [<model>/]topology/runs/..., ...
export function studyOf(key) {
  const parts = key.split("/");
  const i = parts.findIndex((p) => ["runs", ...STUDIES].includes(p));
  if (i < 0) return { study: "main", model: "" };
  const model = parts.slice(0, i).join("/");
  const head = parts[i] === "runs" ? "main" : parts[i];
  const sens = parts.includes("sensitivity") || (head === "main" && sensitivity.includes(model));
  return { study: sens ? "sensitivity" : head, model };
}

function variantLabel(r, study) {
  if (study !== "calibration") return r.variant;
  const grid = calibration[r.system];
  const settings = (grid || {})[r.variant];
  if (!settings) { // a reference run on the calibration shard, or a grid not in the config
    return grid || !/^g\d+$/.test(r.variant) ? `calibration reference run: ${r.variant}` : `calibration point ${r.variant}`;
  }
  const text = Object.entries(settings).map(([k, v]) => `${k}=${typeof v === "object" ? JSON.stringify(v) : v}`).join(", ");
  return `calibration point ${r.variant}: ${text}`;
}

function duration(s) {
  if (s === null || s === undefined || !Number.isFinite(s)) return "–";
  s = Math.max(0, Math.round(s));
  const h = Math.floor(s / 3600); const m = Math.floor((s % 3600) / 60); const sec = s % 60;
  return h ? `${h}h ${String(m).padStart(2, "0")}m` : m ? `${m}m ${String(sec).padStart(2, "0")}s` : `${sec}s`;
}

function renderJobs() {
  if (!jobs) {
    $("jobs-done").textContent = "no Snakemake log read (it is under the workflow folder's .snakemake/log/)";
    for (const id of ["jobs-elapsed", "jobs-eta", "jobs-running", "jobs-failed"]) $(id).textContent = "–";
    $("jobs-bar").style.width = "0";
    $("jobs-rules").replaceChildren();
    return;
  }
  const frac = jobs.total ? jobs.done / jobs.total : 0;
  $("jobs-log").textContent = `${jobs.log}${jobs.ended ? " · ended" : ""}`;
  $("jobs-done").textContent = `${jobs.done} / ${jobs.total} jobs done (${Math.round(100 * frac)}%)`;
  $("jobs-bar").style.width = `${100 * frac}%`;
  $("jobs-elapsed").textContent = duration(jobs.elapsed_s);
  $("jobs-eta").textContent = jobs.ended ? (jobs.done === jobs.total ? "done" : "stopped") : duration(jobs.eta_s);
  $("jobs-running").textContent = String(jobs.jobs.filter((j) => j.status === "running").length);
  $("jobs-failed").textContent = String(jobs.jobs.filter((j) => j.status === "failed").length);
  const byRule = new Map();
  for (const j of jobs.jobs) {
    if (!byRule.has(j.rule)) byRule.set(j.rule, []);
    byRule.get(j.rule).push(j);
  }
  const rules = Object.entries(jobs.rules || {});
  $("jobs-rules").replaceChildren(...rules.map(([rule, c]) => {
    const list = byRule.get(rule) || [];
    const planned = Math.max(c.planned || 0, c.jobs);
    const head = `${rule}: ${c.finished} / ${planned} done${c.jobs - c.finished - c.failed ? `, ${c.jobs - c.finished - c.failed} running` : ""}${c.failed ? `, ${c.failed} failed` : ""}`;
    const running = c.jobs - c.finished - c.failed;
    const [cls, word] = c.failed ? ["failed", "failed"] : c.finished === planned ? ["finished", "done"]
      : running ? ["running", "running"] : ["waiting", "waiting"];
    return el("details", { class: "rule", "data-rule": rule, open: c.failed > 0 },
      el("summary", {}, el("span", { class: `status ${cls}`, text: word }), ` ${head}`),
      el("table", { class: "jobs" }, el("tbody", {}, ...list.map((j) => el("tr", { "data-job": j.jobid },
        el("td", {}, el("span", { class: `status ${j.status}`, text: j.status })),
        el("td", { class: "mono small", text: j.wildcards || j.output || "" }),
        el("td", { class: "muted small", text: j.finished && j.started ? duration(j.finished - j.started) : clock(j.started) }))))));
  }));
}

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

function runRow(r, study) {
    const frac = r.n_examples ? Math.min(1, r.n_done / r.n_examples) : 0;
    const now = r.status === "running" ? (r.activity || "starting") : (r.last_error || "");
    return el("tr", { "data-run": r.key, "data-study": study },
      el("td", {}, el("span", { class: `status ${r.status}`, text: r.status })),
      el("td", { text: r.task }), el("td", { text: r.system }), el("td", { class: study === "calibration" ? "calib" : "", text: variantLabel(r, study) }),
      el("td", {}, `${r.n_done} / ${r.n_examples}`, el("div", { class: "bar" }, el("div", { class: "bar-fill", style: { width: `${100 * frac}%` } }))),
      el("td", { text: r.n_errors + r.n_transient ? `${r.n_errors} + ${r.n_transient} retry` : "0" }),
      el("td", { text: r.n_scored ? `${r.n_correct} / ${r.n_scored}` : "–" }),
      el("td", { class: "mono", text: fmtNum(r.tokens) }),
      el("td", {}, el("div", { class: "preview", title: now, text: now })));
}

function renderRuns() {
  const table = $("runs-table");
  const groups = new Map();
  for (const r of runs.values()) {
    const { study, model } = studyOf(r.key);
    const name = model ? `${study} · ${model}` : study;
    if (!groups.has(name)) groups.set(name, { study, model, rows: [] });
    groups.get(name).rows.push(r);
  }
  for (const b of [...table.tBodies]) b.remove();
  if (!groups.size) {
    table.append(el("tbody", { id: "runs-body" }, el("tr", {}, el("td", { colspan: 9, class: "muted", text: "no runs seen yet" }))));
    return;
  }
  const order = [...groups.entries()].sort(([, a], [, b]) =>
    (STUDIES.indexOf(a.study) - STUDIES.indexOf(b.study)) || a.model.localeCompare(b.model));
  const rank = { running: 0, failed: 1, stopped: 1, incomplete: 1, waiting: 2, finished: 3 };
  for (const [name, g] of order) {
    g.rows.sort((a, b) => a.task.localeCompare(b.task) || a.system.localeCompare(b.system)
      || a.variant.localeCompare(b.variant, undefined, { numeric: true }));
    const count = (s) => g.rows.filter((r) => r.status === s).length;
    const bits = [`${count("finished")} / ${g.rows.length} finished`];
    if (count("running")) bits.push(`${count("running")} running`);
    const bad = g.rows.filter((r) => (rank[r.status] ?? 2) === 1).length;
    if (bad) bits.push(`${bad} failed or stopped`);
    table.append(el("tbody", { class: "study", "data-group": g.study },
      el("tr", { class: "group-head" }, el("th", { colspan: 9 }, el("b", { text: name }), el("span", { class: "muted", text: ` · ${bits.join(" · ")}` }))),
      ...g.rows.map((r) => runRow(r, g.study))));
  }
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
  calibration = wf.calibration || {};
  sensitivity = wf.sensitivity || [];
  jobs = wf.jobs || null;
  renderJobs();
  renderRuns();
  $("wf-events").replaceChildren();
  for (const ev of wf.recent.slice(-100)) logEvent(ev.key, ev);
}

export function onWorkflowEvent(run, ev) {
  runs.set(run.key, run);
  renderRuns();
  logEvent(run.key, ev);
}

export function onJobs(state) {
  jobs = state || null;
  renderJobs();
}

export function initWorkflow() {
  renderRuns();
  renderJobs();
  // elapsed time and the estimate move on between log lines
  setInterval(() => {
    if (!jobs || jobs.ended || !jobs.started) return;
    jobs.elapsed_s = Date.now() / 1000 - jobs.started;
    if (jobs.done > 0 && jobs.done < jobs.total) jobs.eta_s = (jobs.elapsed_s / jobs.done) * (jobs.total - jobs.done);
    $("jobs-elapsed").textContent = duration(jobs.elapsed_s);
    $("jobs-eta").textContent = duration(jobs.eta_s);
  }, 1000);
}
