// Keyboard navigation of the records table: j/k move, Enter opens, n next page.
(function () {
  "use strict";
  const rows = Array.from(document.querySelectorAll("#records tbody tr[data-href]"));
  let current = -1;
  function select(i) {
    if (!rows.length) return;
    current = Math.max(0, Math.min(rows.length - 1, i));
    rows.forEach((r, k) => r.classList.toggle("selected", k === current));
    rows[current].focus({ preventScroll: true });
    rows[current].scrollIntoView({ block: "nearest" });
  }
  rows.forEach((row, i) => row.addEventListener("click", (e) => {
    if (e.target.closest("a")) return;
    select(i);
  }));
  document.addEventListener("keydown", (e) => {
    if (e.target.closest("input, select, textarea") || e.ctrlKey || e.metaKey || e.altKey) return;
    if (e.key === "j") { select(current + 1); e.preventDefault(); }
    else if (e.key === "k") { select(current - 1); e.preventDefault(); }
    else if (e.key === "Enter" && current >= 0) { window.location.assign(rows[current].dataset.href); e.preventDefault(); }
    else if (e.key === "n") {
      const next = document.getElementById("next-page");
      if (next) window.location.assign(next.href);
    }
  });
})();
