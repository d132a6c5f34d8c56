// The static export's viewer: renders window.ASSAY_BUNDLE with textContent only (the data is hostile).
(function () {
  "use strict";
  const bundle = window.ASSAY_BUNDLE || { meta: {}, records: [] };
  const records = bundle.records;
  const body = document.querySelector("#records tbody");
  const detail = document.getElementById("detail");
  const fVerifier = document.getElementById("f-verifier");
  const fVerdict = document.getElementById("f-verdict");
  const fText = document.getElementById("f-text");
  let shown = [];
  let current = -1;

  function el(tag, text, cls) {
    const node = document.createElement(tag);
    if (text !== undefined && text !== null) node.textContent = String(text);
    if (cls) node.className = cls;
    return node;
  }
  function options(select, values) {
    Array.from(new Set(values)).sort().forEach((v) => select.appendChild(el("option", v)));
  }
  options(fVerifier, records.map((r) => r.verifier));
  options(fVerdict, records.map((r) => r.verdict));

  function pretty(value) { return JSON.stringify(value, null, 2); }

  function show(i) {
    current = i;
    Array.from(body.children).forEach((tr, k) => tr.classList.toggle("selected", k === i));
    const r = shown[i];
    if (!r) return;
    body.children[i].scrollIntoView({ block: "nearest" });
    detail.replaceChildren();
    detail.appendChild(el("h2", "Record " + r.id));
    const facts = el("dl", null, "facts");
    [["verdict", r.verdict], ["reward", r.reward], ["verifier", r.verifier + " " + r.verifier_version],
     ["time", r.created_at], ["task", r.task_id || r.task_hash], ["group", r.group_id ? r.group_id + " #" + r.group_index : ""],
     ["flags", (r.flags || []).map((f) => (typeof f === "string" ? f : f.name)).join(", ")]]
      .forEach(([k, v]) => { facts.appendChild(el("dt", k)); facts.appendChild(el("dd", v)); });
    detail.appendChild(facts);
    detail.appendChild(el("h3", "Response"));
    detail.appendChild(el("pre", r.response === null ? "(not retained)" : r.response, "response"));
    detail.appendChild(el("h3", "Components"));
    detail.appendChild(el("pre", pretty(r.components), "evidence"));
    detail.appendChild(el("h3", "Evidence"));
    detail.appendChild(el("pre", pretty(r.evidence), "evidence"));
    detail.appendChild(el("h3", "Task (public view; hidden fields are hashes)"));
    detail.appendChild(el("pre", pretty(r.task), "evidence"));
  }

  function render() {
    const verifier = fVerifier.value, verdict = fVerdict.value, text = fText.value.toLowerCase();
    shown = records.filter((r) => (!verifier || r.verifier === verifier) && (!verdict || r.verdict === verdict)
      && (!text || [r.response, r.task_id, JSON.stringify(r.task), JSON.stringify(r.flags)]
        .some((s) => s && String(s).toLowerCase().includes(text))));
    body.replaceChildren();
    shown.forEach((r, i) => {
      const tr = el("tr");
      [r.created_at.replace("T", " ").slice(0, 19), r.verifier, r.verdict, Number(r.reward).toFixed(3),
       (r.flags || []).map((f) => (typeof f === "string" ? f : f.name)).join(" "), r.task_id || r.task_hash.slice(0, 12),
       (r.response || "").slice(0, 160)].forEach((v, k) => tr.appendChild(el("td", v, k === 3 ? "num" : k === 6 ? "preview" : "")));
      tr.addEventListener("click", () => show(i));
      body.appendChild(tr);
    });
    current = -1;
  }
  [fVerifier, fVerdict].forEach((s) => s.addEventListener("change", render));
  fText.addEventListener("input", render);
  document.getElementById("bundle-filter").addEventListener("submit", (e) => e.preventDefault());
  document.addEventListener("keydown", (e) => {
    if (e.target.closest("input, select")) return;
    if (e.key === "j") show(Math.min(shown.length - 1, current + 1));
    else if (e.key === "k") show(Math.max(0, current - 1));
  });
  render();
  document.body.dataset.rendered = String(shown.length);
})();
