// The review queue: one key press labels the record and the next one loads.
(function () {
  "use strict";
  const form = document.getElementById("label-form");
  const item = document.getElementById("review-item");
  if (!form || !item) return;
  const kind = document.getElementById("label-kind");
  const verdict = document.getElementById("label-verdict");
  const pattern = document.getElementById("label-pattern");
  const note = document.getElementById("label-note");
  const current = item.querySelector(".verdict").textContent.trim();
  const FLIP = { correct: "incorrect", incorrect: "correct" };

  function submit(label) {
    kind.value = label;
    verdict.value = label === "disagree" ? (verdict.value || FLIP[current] || "") : "";
    if (label === "disagree" && !verdict.value) { verdict.focus(); return; }
    if (label === "exploit" && !pattern.value.trim()) { pattern.focus(); return; }
    form.requestSubmit();
  }
  document.addEventListener("keydown", (e) => {
    if (e.target.closest("input, select, textarea") || e.ctrlKey || e.metaKey || e.altKey) return;
    const actions = {
      a: () => submit("agree"),
      d: () => submit("disagree"),
      x: () => submit("exploit"),
      s: () => window.location.assign(document.getElementById("skip").href),
      o: () => window.location.assign(document.getElementById("open-record").href),
      n: () => note.focus(),
    };
    if (actions[e.key]) { e.preventDefault(); actions[e.key](); }
  });
})();
