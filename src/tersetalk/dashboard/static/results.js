// Results view: one example's conversation in every system, the summary table, the figures.
import { el, fmtNum, getJSON } from "./util.js";

const $ = (id) => document.getElementById(id);
const SUMMARY_DEFAULT = ["task", "system", "variant", "n", "n_errors", "accuracy", "em", "f1",
  "tokens_total_cl100k_mean", "tokens_total_model_mean", "compliance_first_try_rate"];
let loaded = false;
let summary = null;
let sortState = { col: null, dir: 1 };
// files skipped by the server (unreadable, or a link out of results/), per source
const skipped = { examples: [], conversation: [], summary: [] };

function renderWarnings() {
  const seen = new Map();
  for (const w of [...skipped.examples, ...skipped.conversation, ...skipped.summary]) {
    seen.set(`${w.path}\u0000${w.message}`, w);
  }
  const box = $("results-warnings");
  box.replaceChildren(...[...seen.values()].map((w) =>
    el("li", {}, el("b", { text: w.path }), ` ${w.message}`)));
  box.hidden = seen.size === 0;
}

function verdictBadge(run) {
  if (run.error) return el("span", { class: "badge bad", text: "error" });
  if (run.correct === null || run.correct === undefined) return el("span", { class: "badge", text: "unscored" });
  return run.correct ? el("span", { class: "badge ok", text: "correct" }) : el("span", { class: "badge bad", text: "wrong" });
}

function renderConversation(conv) {
  $("example-head").replaceChildren(
    el("div", { class: "q", text: conv.question || "" }),
    el("div", { class: "muted small", text: `gold: ${conv.gold ?? "–"} · example ${conv.example_id} · ${conv.runs.length} run(s)` }));
  $("conversations").replaceChildren(...conv.runs.map((run) => {
    const score = [`F1 ${fmtNum(run.f1, 2)}`, `EM ${fmtNum(run.em, 0)}`].join(" · ");
    const msgs = run.messages.map((m) => el("div", { class: "msg" },
      el("div", { class: "msg-head" }, el("span", {}, el("b", { text: `${m.sender} → ${m.receiver}` }), ` ${m.kind}`),
        el("span", { class: "mono", text: `${m.tokens_cl100k} tok` })),
      el("pre", { class: "text", text: m.content })));
    return el("article", { class: "conv", "data-system": run.system, "data-variant": run.variant },
      el("div", { class: "conv-head" }, el("span", { class: "name", text: `${run.system} / ${run.variant}` }), verdictBadge(run)),
      el("dl", {},
        el("dt", { text: "prediction" }), el("dd", { text: run.prediction || "–" }),
        el("dt", { text: "gold" }), el("dd", { text: run.gold ?? "–" }),
        el("dt", { text: "score" }), el("dd", { text: score }),
        el("dt", { text: "tokens" }), el("dd", { text: `${fmtNum(run.tokens_total_cl100k)} cl100k in ${run.n_messages} messages, ${run.n_model_calls} model calls` }),
        run.error ? el("dt", { text: "error" }) : null, run.error ? el("dd", { text: run.error }) : null),
      ...msgs);
  }));
}

async function loadConversation() {
  const task = $("task-select").value;
  const example = $("example-select").value;
  if (!task || !example) return;
  try {
    const conv = await getJSON(`/api/conversation?task=${encodeURIComponent(task)}&example=${encodeURIComponent(example)}`);
    skipped.conversation = conv.warnings || [];
    renderWarnings();
    renderConversation(conv);
  } catch (err) {
    $("conversations").replaceChildren(el("p", { class: "muted", text: err.message }));
  }
}

async function loadExamples() {
  const task = $("task-select").value;
  const got = task ? await getJSON(`/api/examples?task=${encodeURIComponent(task)}`) : { examples: [], warnings: [] };
  const examples = got.examples;
  skipped.examples = got.warnings || [];
  skipped.conversation = [];
  renderWarnings();
  $("example-select").replaceChildren(...examples.map((e) => el("option", { value: e.example_id,
    text: `#${e.position} ${e.question.slice(0, 110)}` })));
  await loadConversation();
}

function cellValue(v) {
  return typeof v === "number" ? v : v === null || v === undefined ? "" : String(v);
}

function renderSummary() {
  const table = $("summary-table");
  if (!summary || summary.missing) {
    $("summary-note").textContent = "results/summary.parquet not built yet (snakemake builds it)";
    table.replaceChildren();
    return;
  }
  const all = $("all-columns").checked;
  const cols = summary.columns.map((c, i) => [c, i]).filter(([c]) => all || SUMMARY_DEFAULT.includes(c));
  let rows = summary.rows.slice();
  if (sortState.col !== null) {
    const i = sortState.col;
    rows.sort((a, b) => {
      const x = cellValue(a[i]); const y = cellValue(b[i]);
      if (typeof x === "number" && typeof y === "number") return sortState.dir * (x - y);
      return sortState.dir * String(x).localeCompare(String(y));
    });
  }
  const head = el("tr", {}, ...cols.map(([c, i]) => {
    const th = el("th", { "data-col": c, scope: "col", text: c });
    if (sortState.col === i) th.setAttribute("aria-sort", sortState.dir > 0 ? "ascending" : "descending");
    th.addEventListener("click", () => {
      sortState = { col: i, dir: sortState.col === i ? -sortState.dir : 1 };
      renderSummary();
    });
    return th;
  }));
  table.replaceChildren(el("thead", {}, head), el("tbody", {}, ...rows.map((r) => el("tr", {},
    ...cols.map(([, i]) => el("td", { class: typeof r[i] === "number" ? "num" : "", text: typeof r[i] === "number" ? fmtNum(r[i]) : (r[i] ?? "") }))))));
  $("summary-note").textContent = `${summary.rows.length} rows · click a column to sort`;
}

async function loadFigures() {
  const figs = await getJSON("/api/figures");
  $("figures").replaceChildren(...(figs.length ? figs.map((f) => el("figure", {},
    el("a", { href: f.url, target: "_blank", rel: "noopener" }, el("img", { src: f.url, alt: f.name, loading: "lazy" })),
    el("figcaption", { text: f.name }))) : [el("p", { class: "muted", text: "no figures yet (snakemake draws them into figures/)" })]));
}

export async function showResults() {
  if (loaded) return;
  loaded = true;
  try {
    const tasks = await getJSON("/api/tasks");
    $("task-select").replaceChildren(...tasks.map((t) => el("option", { value: t.task, text: `${t.task} (${t.n_runs} runs)` })));
    if (!tasks.length) $("conversations").replaceChildren(el("p", { class: "muted", text: "no run files under results/runs/ yet" }));
    await loadExamples();
    summary = await getJSON("/api/summary");
    skipped.summary = summary.warnings || [];
    renderWarnings();
    renderSummary();
    await loadFigures();
  } catch (err) {
    loaded = false;
    $("conversations").replaceChildren(el("p", { class: "muted", text: `could not load results: ${err.message}` }));
  }
}

export function initResults() {
  $("task-select").addEventListener("change", loadExamples);
  $("example-select").addEventListener("change", loadConversation);
  $("all-columns").addEventListener("change", renderSummary);
}
