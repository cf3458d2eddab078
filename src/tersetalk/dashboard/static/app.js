// The dashboard's entry point: tabs, theme, and the one WebSocket every view listens to.
import { initLive, onLiveMessage, onLiveSnapshot } from "./live.js";
import { initWorkflow, onJobs, onWorkflowEvent, onWorkflowSnapshot } from "./workflow.js";
import { initResults, showResults } from "./results.js";

const THEME_KEY = "tersetalk-theme";

function applyTheme(theme) {
  document.documentElement.dataset.theme = theme;
  const btn = document.getElementById("theme-toggle");
  btn.textContent = theme === "dark" ? "Light mode" : "Dark mode";
  btn.setAttribute("aria-pressed", String(theme === "dark"));
}

function initTheme() {
  applyTheme(document.documentElement.dataset.theme || "light");
  document.getElementById("theme-toggle").addEventListener("click", () => {
    const next = document.documentElement.dataset.theme === "dark" ? "light" : "dark";
    try { localStorage.setItem(THEME_KEY, next); } catch (e) { /* storage off: not remembered */ }
    applyTheme(next);
  });
}

function showView() {
  const name = (location.hash || "#live").slice(1).split("?")[0];
  const view = ["live", "workflow", "results"].includes(name) ? name : "live";
  for (const section of document.querySelectorAll("section.view")) {
    section.hidden = section.dataset.view !== view;
  }
  for (const tab of document.querySelectorAll(".tabs a")) {
    tab.setAttribute("aria-selected", String(tab.dataset.view === view));
  }
  if (view === "results") showResults();
}

function connect(attempt = 0) {
  const conn = document.getElementById("conn");
  const proto = location.protocol === "https:" ? "wss:" : "ws:";
  const ws = new WebSocket(`${proto}//${location.host}/ws`);
  ws.addEventListener("open", () => {
    attempt = 0;
    conn.textContent = "live";
    conn.className = "conn up";
  });
  ws.addEventListener("message", (e) => {
    const msg = JSON.parse(e.data);
    if (msg.type === "snapshot") {
      onLiveSnapshot(msg.live);
      onWorkflowSnapshot(msg.progress);
    } else if (msg.type === "run_event") {
      onWorkflowEvent(msg.run, msg.event);
    } else if (msg.type === "jobs") {
      onJobs(msg.jobs);
    } else {
      onLiveMessage(msg);
    }
  });
  ws.addEventListener("close", () => {
    conn.textContent = "reconnecting…";
    conn.className = "conn down";
    const wait = Math.min(5000, 300 * 2 ** attempt);
    setTimeout(() => connect(attempt + 1), wait);
  });
}

initTheme();
initLive();
initWorkflow();
initResults();
window.addEventListener("hashchange", showView);
showView();
connect();
