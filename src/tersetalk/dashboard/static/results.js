// Results view: one model's results: the summary table, one example's conversation in the
// chosen systems (or two of them side by side), the figures. The model, task, example and
// the choice of systems are in the URL (#results?model=..&task=..&example=..&show=..&compare=..),
// so a reload or a shared link shows the same.
import { el, fmtNum, getJSON } from "./util.js";

const $ = (id) => document.getElementById(id);
const SUMMARY_DEFAULT = ["task", "system", "variant", "n", "n_errors", "accuracy", "em", "f1",
  "tokens_total_cl100k_mean", "tokens_total_model_mean", "compliance_first_try_rate"];
let loaded = false;
let summary = null;
let conv = null; // the example's conversations as last loaded
// what the URL holds: model, task, example, shown labels (null: all), compare pair
const sel = { model: null, task: null, example: null, show: null, compare: null };
const label = (run) => `${run.system}/${run.variant}`;

function readHash() {
  const [, query = ""] = location.hash.split("?");
  const q = new URLSearchParams(query);
  sel.model = q.get("model");
  sel.task = q.get("task");
  sel.example = q.get("example");
  sel.show = q.has("show") ? q.get("show").split(",").filter(Boolean) : null;
  const pair = (q.get("compare") || "").split(",").filter(Boolean);
  sel.compare = pair.length === 2 ? pair : null; // anything else: no comparison
}

function writeHash() {
  const q = new URLSearchParams();
  for (const k of ["model", "task", "example"]) if (sel[k]) q.set(k, sel[k]);
  if (sel.show !== null) q.set("show", sel.show.join(","));
  if (sel.compare) q.set("compare", sel.compare.join(","));
  const hash = `#results${q.toString() ? `?${q}` : ""}`;
  if (location.hash !== hash) history.replaceState(null, "", hash);
}

const api = (path, params) => {
  const q = new URLSearchParams(Object.entries(params).filter(([, v]) => v));
  return `${path}${q.toString() ? `?${q}` : ""}`;
};
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

// the labels of the example's runs, in the order the server gives (task, system, variant)
const labels = () => (conv ? conv.runs.map(label) : []);
const shown = (lbl) => sel.show === null || sel.show.includes(lbl);

function renderFilter() {
  const all = labels();
  const needle = $("filter-text").value.trim().toLowerCase();
  const bySystem = new Map();
  for (const lbl of all) {
    const [system] = lbl.split("/");
    if (!bySystem.has(system)) bySystem.set(system, []);
    bySystem.get(system).push(lbl);
  }
  const groups = [];
  for (const [system, lbls] of bySystem) {
    const match = lbls.filter((l) => !needle || l.toLowerCase().includes(needle));
    if (!match.length) continue;
    const boxes = match.map((l) => {
      const box = el("input", { type: "checkbox", "data-label": l, checked: shown(l) });
      box.addEventListener("change", () => {
        const cur = new Set(sel.show === null ? all : sel.show);
        if (box.checked) cur.add(l); else cur.delete(l);
        sel.show = cur.size === all.length ? null : all.filter((x) => cur.has(x));
        update();
      });
      return el("label", { class: "chip" }, box, ` ${l.split("/")[1]}`);
    });
    const whole = el("input", { type: "checkbox", "data-system": system,
      checked: lbls.every(shown) });
    whole.indeterminate = !lbls.every(shown) && lbls.some(shown);
    whole.addEventListener("change", () => {
      const cur = new Set(sel.show === null ? all : sel.show);
      for (const l of lbls) if (whole.checked) cur.add(l); else cur.delete(l);
      sel.show = cur.size === all.length ? null : all.filter((x) => cur.has(x));
      update();
    });
    groups.push(el("div", { class: "filter-group" },
      el("label", { class: "sys" }, whole, el("b", { text: ` ${system}` })), ...boxes));
  }
  $("filter-list").replaceChildren(...(groups.length ? groups
    : [el("p", { class: "muted small", text: "no system matches" })]));
  const n = all.filter(shown).length;
  $("filter-summary").textContent = `Systems: ${n} of ${all.length} shown`;
}

function renderCompare() {
  const all = labels();
  const on = Boolean(sel.compare);
  $("mode-compare").checked = on;
  $("mode-all").checked = !on;
  $("compare-pick").hidden = !on;
  $("system-filter").hidden = on;
  if (!on) return;
  for (const [i, id] of [[0, "compare-a"], [1, "compare-b"]]) {
    $(id).replaceChildren(...all.map((l) => el("option", { value: l, text: l })));
    if (all.includes(sel.compare[i])) $(id).value = sel.compare[i];
  }
}

function update() {
  writeHash();
  renderFilter();
  renderCompare();
  if (conv) renderConversation(conv);
  renderSummary();
}

function renderConversation(conv) {
  let runs = conv.runs.filter((r) => shown(label(r)));
  const compare = Boolean(sel.compare);
  if (compare) {
    runs = sel.compare.map((l) => conv.runs.find((r) => label(r) === l)).filter(Boolean);
  }
  const open = compare || runs.length <= 6; // many conversations: messages folded
  $("conv-note").textContent = compare ? "two conversations side by side"
    : `${runs.length} of ${conv.runs.length} shown${open ? "" : " · messages folded (open one, or compare two)"}`;
  $("conversations").classList.toggle("compare", compare);
  $("example-head").replaceChildren(
    el("div", { class: "q", text: conv.question || "" }),
    el("div", { class: "muted small", text: `gold: ${conv.gold ?? "–"} · example ${conv.example_id} · ${conv.runs.length} run(s)` }));
  if (!runs.length) {
    $("conversations").replaceChildren(el("p", { class: "muted", text: "no system chosen: pick some under Systems" }));
    return;
  }
  $("conversations").replaceChildren(...runs.map((run) => {
    const score = [`F1 ${fmtNum(run.f1, 2)}`, `EM ${fmtNum(run.em, 0)}`].join(" · ");
    const msgs = run.messages.map((m) => el("div", { class: "msg" },
      el("div", { class: "msg-head" }, el("span", {}, el("b", { text: `${m.sender} → ${m.receiver}` }), ` ${m.kind}`),
        el("span", { class: "mono", text: `${m.tokens_cl100k} tok` })),
      el("pre", { class: "text", text: m.content })));
    const pick = el("button", { type: "button", class: "btn ghost small", title: "compare this one with another",
      text: compare ? "leave compare" : "compare" });
    pick.addEventListener("click", () => {
      if (compare) sel.compare = null;
      else {
        const other = labels().find((l) => l !== label(run) && shown(l)) || labels().find((l) => l !== label(run));
        sel.compare = [label(run), other || label(run)];
      }
      update();
    });
    const fold = el("details", { class: "msgs", open }, el("summary", { class: "small", text: `${run.messages.length} messages` }), ...msgs);
    return el("article", { class: "conv", "data-system": run.system, "data-variant": run.variant, "data-label": label(run) },
      el("div", { class: "conv-head" }, el("span", { class: "name", text: `${run.system} / ${run.variant}` }), verdictBadge(run), pick),
      el("dl", {},
        el("dt", { text: "prediction" }), el("dd", { text: run.prediction || "–" }),
        el("dt", { text: "gold" }), el("dd", { text: run.gold ?? "–" }),
        el("dt", { text: "score" }), el("dd", { text: score }),
        el("dt", { text: "tokens" }), el("dd", { text: `${fmtNum(run.tokens_total_cl100k)} cl100k in ${run.n_messages} messages, ${run.n_model_calls} model calls` }),
        run.error ? el("dt", { text: "error" }) : null, run.error ? el("dd", { text: run.error }) : null),
      fold);
  }));
}

async function loadConversation() {
  const task = $("task-select").value;
  const example = $("example-select").value;
  sel.example = example || null;
  writeHash();
  if (!task || !example) return;
  try {
    conv = await getJSON(api("/api/conversation", { model: sel.model, task, example }));
    skipped.conversation = conv.warnings || [];
    renderWarnings();
    if (sel.show !== null) sel.show = sel.show.filter((l) => labels().includes(l));
    update();
  } catch (err) {
    $("conversations").replaceChildren(el("p", { class: "muted", text: err.message }));
  }
}

async function loadExamples() {
  const task = $("task-select").value;
  sel.task = task || null;
  const got = task ? await getJSON(api("/api/examples", { model: sel.model, task })) : { examples: [], warnings: [] };
  const examples = got.examples;
  skipped.examples = got.warnings || [];
  skipped.conversation = [];
  renderWarnings();
  $("example-select").replaceChildren(...examples.map((e) => el("option", { value: e.example_id,
    text: `#${e.position} ${e.question.slice(0, 110)}` })));
  if (sel.example && examples.some((e) => e.example_id === sel.example)) $("example-select").value = sel.example;
  await loadConversation();
}

function cellValue(v) {
  return typeof v === "number" ? v : v === null || v === undefined ? "" : String(v);
}

function renderSummary() {
  const table = $("summary-table");
  if (!summary || summary.missing) {
    $("summary-note").textContent = `results/${summary ? summary.path : "summary.parquet"} not built yet (snakemake builds it)`;
    table.replaceChildren();
    return;
  }
  const all = $("all-columns").checked;
  const cols = summary.columns.map((c, i) => [c, i]).filter(([c]) => all || SUMMARY_DEFAULT.includes(c));
  const [si, vi] = ["system", "variant"].map((c) => summary.columns.indexOf(c));
  let rows = summary.rows.slice();
  // the chosen systems' rows, on every task
  const chosen = sel.compare ? sel.compare : sel.show;
  if (chosen !== null && si >= 0 && vi >= 0) {
    rows = rows.filter((r) => chosen.includes(`${r[si]}/${r[vi]}`));
  }
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
  const ti = summary.columns.indexOf("task");
  const canOpen = ti >= 0 && si >= 0 && vi >= 0;
  if (canOpen) head.prepend(el("th", { scope: "col", class: "open-col", text: "" }));
  // one click from a row to its run's conversation (the link also opens in a new tab)
  const opener = (r) => {
    const run = `${r[si]}/${r[vi]}`;
    const href = `#results?${new URLSearchParams({ ...(sel.model ? { model: sel.model } : {}),
      task: r[ti], show: run })}`;
    const a = el("a", { class: "open-conv", href, title: `open ${run}'s conversation on ${r[ti]}`,
      text: "conversation" });
    a.addEventListener("click", (e) => {
      if (e.ctrlKey || e.metaKey || e.shiftKey || e.button !== 0) return; // a new tab: the link
      e.preventDefault();
      openRun(String(r[ti]), run);
    });
    return el("td", {}, a);
  };
  table.replaceChildren(el("thead", {}, head), el("tbody", {}, ...rows.map((r) => el("tr", {},
    canOpen ? opener(r) : null,
    ...cols.map(([, i]) => el("td", { class: typeof r[i] === "number" ? "num" : "", text: typeof r[i] === "number" ? fmtNum(r[i]) : (r[i] ?? "") }))))));
  $("summary-note").textContent = rows.length === summary.rows.length
    ? `${summary.rows.length} rows · click a column to sort`
    : `${rows.length} of ${summary.rows.length} rows (the chosen systems) · click a column to sort`;
}

// a summary row's run: its task, its first example, only that run shown
async function openRun(task, run) {
  sel.compare = null;
  sel.show = [run];
  if ($("task-select").value !== task) {
    $("task-select").value = task;
    sel.example = null;
    await loadExamples();
  } else update();
  $("results-conversations").scrollIntoView({ block: "start" });
}

async function copyLink(button) {
  const url = location.href;
  try {
    await navigator.clipboard.writeText(url);
  } catch (err) { // no clipboard permission: select the link in a field to copy by hand
    const field = el("input", { type: "text", value: url, readonly: true, class: "link-field" });
    button.after(field);
    field.select();
    return;
  }
  button.textContent = "link copied";
  setTimeout(() => { button.textContent = "copy link"; }, 2000);
}

async function loadFigures() {
  const figs = await getJSON(api("/api/figures", { model: sel.model }));
  $("figures").replaceChildren(...(figs.length ? figs.map((f) => el("figure", {},
    el("a", { href: f.url, target: "_blank", rel: "noopener" }, el("img", { src: f.url, alt: f.name, loading: "lazy" })),
    el("figcaption", { text: f.name }))) : [el("p", { class: "muted", text: "no figures yet (snakemake draws them into figures/)" })]));
}

async function loadModel() {
  const tasks = await getJSON(api("/api/tasks", { model: sel.model }));
  $("task-select").replaceChildren(...tasks.map((t) => el("option", { value: t.task, text: `${t.task} (${t.n_runs} runs)` })));
  if (sel.task && tasks.some((t) => t.task === sel.task)) $("task-select").value = sel.task;
  conv = null;
  if (!tasks.length) {
    $("conversations").replaceChildren(el("p", { class: "muted", text: `no run files under results/${sel.model ? `${sel.model}/` : ""}runs/ yet` }));
    $("example-select").replaceChildren();
  }
  // the summary first: it sits above the conversations, which must not move once shown
  summary = await getJSON(api("/api/summary", { model: sel.model }));
  skipped.summary = summary.warnings || [];
  renderWarnings();
  renderSummary();
  await loadExamples();
  await loadFigures();
}

export async function showResults() {
  if (loaded) {
    // the Results tab clicked (a bare #results): the selection goes back into the URL;
    // another selection pasted or followed (a shared link): it is loaded
    if (!location.hash.includes("?")) { writeHash(); return; }
    const before = JSON.stringify(sel);
    readHash();
    if (JSON.stringify(sel) === before) return;
  } else readHash();
  loaded = true;
  try {
    const models = await getJSON("/api/models");
    const names = models.models.map((m) => m.model);
    $("model-select").replaceChildren(...names.map((m) => el("option", { value: m, text: m })));
    if (!sel.model || !names.includes(sel.model)) sel.model = models.default;
    if (sel.model) $("model-select").value = sel.model;
    $("model-select").disabled = names.length < 2;
    $("model-note").textContent = models.note || "";
    $("model-note").hidden = !models.note;
    await loadModel();
  } catch (err) {
    loaded = false;
    $("conversations").replaceChildren(el("p", { class: "muted", text: `could not load results: ${err.message}` }));
  }
}

export function initResults() {
  $("model-select").addEventListener("change", () => {
    sel.model = $("model-select").value;
    sel.example = null;
    loadModel().catch((err) => $("conversations").replaceChildren(el("p", { class: "muted", text: err.message })));
  });
  $("task-select").addEventListener("change", () => { sel.example = null; loadExamples(); });
  $("example-select").addEventListener("change", loadConversation);
  $("all-columns").addEventListener("change", renderSummary);
  $("copy-link").addEventListener("click", () => copyLink($("copy-link")));
  $("filter-text").addEventListener("input", renderFilter);
  const setShow = (which) => {
    const all = labels();
    const needle = $("filter-text").value.trim().toLowerCase();
    const hit = all.filter((l) => !needle || l.toLowerCase().includes(needle));
    const cur = new Set(sel.show === null ? all : sel.show);
    for (const l of hit) if (which) cur.add(l); else cur.delete(l);
    sel.show = cur.size === all.length ? null : all.filter((x) => cur.has(x));
    update();
  };
  $("filter-all").addEventListener("click", () => setShow(true));
  $("filter-none").addEventListener("click", () => setShow(false));
  for (const id of ["mode-all", "mode-compare"]) {
    $(id).addEventListener("change", () => {
      if ($("mode-compare").checked && !sel.compare) {
        const pool = labels().filter(shown);
        const from = pool.length >= 2 ? pool : labels();
        sel.compare = [from[0], from[1] || from[0]];
      } else if ($("mode-all").checked) sel.compare = null;
      update();
    });
  }
  for (const [i, id] of [[0, "compare-a"], [1, "compare-b"]]) {
    $(id).addEventListener("change", () => { sel.compare[i] = $(id).value; update(); });
  }
  for (const a of document.querySelectorAll("[data-jump]")) {
    a.addEventListener("click", (e) => { // the hash holds the selection: scroll, do not navigate
      e.preventDefault();
      document.getElementById(a.dataset.jump).scrollIntoView({ block: "start" });
    });
  }
}
