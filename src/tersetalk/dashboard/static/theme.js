// Runs before the page paints: the remembered theme (or the system's) with no flash.
(function () {
  var saved = null;
  try { saved = localStorage.getItem("tersetalk-theme"); } catch (e) { /* private mode */ }
  var dark = saved ? saved === "dark" : window.matchMedia("(prefers-color-scheme: dark)").matches;
  document.documentElement.dataset.theme = dark ? "dark" : "light";
})();
