// Draws a training run's series against the step with Chart.js (vendored), from the page's JSON block.
// Alarms are marked (▲) at the step they were raised; clicking a mark opens the alarm, clicking a point
// that step's records.
(function () {
  "use strict";
  const source = document.getElementById("run-data");
  if (!source || typeof Chart === "undefined") return;
  const data = JSON.parse(source.textContent);
  const PALETTE = ["#1565c0", "#ad1457", "#f9a825", "#00695c", "#4e342e", "#5e35b1", "#9e9d24", "#d84315"];
  const ALARM = "#d50000";
  Chart.defaults.animation = false;
  Chart.defaults.maintainAspectRatio = false;
  const points = (values) => data.steps.map((step, i) => ({ x: step, y: values[i] }));
  const percent = { min: 0, suggestedMax: 1, ticks: { callback: (v) => Math.round(v * 100) + "%" } };
  const RULES = {
    reward: ["reward_up_heldout_down"], flags: ["flag_rate"], length: ["length_growth"],
    diversity: ["diversity_collapse"], failures: ["timeouts_by_length"],
  };

  function marks(kind) {
    // Every alarm on the reward chart (the run's headline); each rule's own on its chart.
    const shown = data.alarms.filter((a) => kind === "reward" || RULES[kind].includes(a.rule));
    return {
      label: "alarm", type: "scatter", yAxisID: "mark", pointStyle: "triangle", pointRadius: 9, pointHoverRadius: 11,
      backgroundColor: ALARM, borderColor: ALARM, data: shown.map((a) => ({ x: a.step, y: 0.95, alarm: a.index })),
    };
  }
  function line(label, values, color, extra) {
    return { label, data: points(values), borderColor: color, backgroundColor: color, pointRadius: 2, ...extra };
  }
  function reward() {
    const mean = data.reward, std = data.reward_std;
    const upper = mean.map((m, i) => (m === null || std[i] === null ? null : m + std[i]));
    const lower = mean.map((m, i) => (m === null || std[i] === null ? null : m - std[i]));
    const sets = [
      line("reward ± std", upper, "rgba(21,101,192,0.15)", { pointRadius: 0, fill: "+1", borderWidth: 0 }),
      line("reward − std", lower, "rgba(21,101,192,0.15)", { pointRadius: 0, borderWidth: 0 }),
      line("training reward", mean, PALETTE[0]),
      line("correct share", data.correct, PALETTE[3], { borderDash: [5, 3] }),
    ];
    Object.entries(data.held_out).forEach(([name, evals], i) => {
      sets.push({ label: "held-out pass@1 · " + name, data: evals.map((p) => ({ x: p.step, y: p.pass1 })),
                  borderColor: PALETTE[(i + 1) % PALETTE.length], backgroundColor: PALETTE[(i + 1) % PALETTE.length],
                  pointRadius: 4, pointStyle: "rectRot" });
    });
    return { sets, y: { suggestedMin: 0, suggestedMax: 1 } };
  }
  function flags() {
    const sets = Object.entries(data.flags).map(([name, values], i) => line(name, values, PALETTE[i % PALETTE.length]));
    return { sets, y: percent };
  }
  function length() {
    const tokens = data.tokens.some((v) => v !== null);
    return { sets: [
      line(tokens ? "mean tokens" : "mean characters", tokens ? data.tokens : data.chars, PALETTE[0]),
      line("tokens per correct answer", data.tokens_per_correct, PALETTE[1], { borderDash: [5, 3] }),
    ], y: { beginAtZero: true } };
  }
  function diversity() {
    return { sets: [
      line("zero-variance share", data.zero_variance, PALETTE[4]),
      line("distinct answers / group", data.distinct, PALETTE[5], { yAxisID: "y2" }),
    ], y: percent, y2: { position: "right", beginAtZero: true, grid: { drawOnChartArea: false } } };
  }
  function failures() {
    return { sets: [
      line("error", data.errors, "#424242"), line("timeout", data.timeouts, "#00838f"),
      line("truncated", data.truncation, PALETTE[2]),
      line("timeout+error, longest quarter", data.longest_failing, ALARM, { borderDash: [4, 2] }),
    ], y: { min: 0, suggestedMax: 0.2, ticks: { callback: (v) => Math.round(v * 100) + "%" } } };
  }
  const KINDS = { reward, flags, length, diversity, failures };

  function open(chart, event) {
    const hit = chart.getElementsAtEventForMode(event, "nearest", { intersect: true }, false)[0];
    if (!hit) return;
    const point = chart.data.datasets[hit.datasetIndex].data[hit.index];
    if (point.alarm !== undefined) {
      window.location.hash = "alarm-" + point.alarm;
    } else {
      window.location.href = "/ui/records?" + new URLSearchParams({ run: data.id, step: String(point.x) });
    }
  }

  let drawn = 0;
  document.querySelectorAll("canvas[data-chart]").forEach((canvas) => {
    const made = KINDS[canvas.dataset.chart]();
    const scales = {
      x: { type: "linear", title: { display: true, text: "step" }, ticks: { precision: 0 },
           suggestedMin: data.steps[0], suggestedMax: data.steps[data.steps.length - 1] },
      y: made.y, mark: { display: false, min: 0, max: 1 },
    };
    if (made.y2) scales.y2 = made.y2;
    new Chart(canvas, {
      type: "line",
      data: { datasets: made.sets.concat([marks(canvas.dataset.chart)]) },
      options: {
        spanGaps: true, scales, onClick: (event, _els, chart) => open(chart, event),
        plugins: { legend: { labels: { boxWidth: 12, filter: (item) => !item.text.startsWith("reward − ") } } },
      },
    });
    drawn += 1;
  });
  document.body.dataset.chartsDrawn = String(drawn);

  // The per-step table, from the same data (the page carries each step once, not twice).
  const num = (v, digits) => (v === null || v === undefined ? "—" : v.toFixed(digits));
  const pct = (v) => (v === null || v === undefined ? "—" : (100 * v).toFixed(1) + "%");
  const body = document.querySelector("#steps tbody");
  if (body) {
    const cell = (text, numeric) => {
      const td = document.createElement("td");
      if (numeric) td.className = "num";
      td.textContent = text;
      return td;
    };
    const rows = document.createDocumentFragment();
    data.steps.forEach((step, i) => {
      const tr = document.createElement("tr");
      const first = cell("", true);
      const link = document.createElement("a");
      link.href = "/ui/records?" + new URLSearchParams({ run: data.id, step: String(step) });
      link.textContent = String(step);
      first.appendChild(link);
      tr.appendChild(first);
      [String(data.n[i]), num(data.reward[i], 3), num(data.reward_std[i], 3), pct(data.zero_variance[i]),
       num(data.distinct[i], 2), num(data.tokens[i], 1), num(data.tokens_per_correct[i], 1),
       pct(data.truncation[i]), pct(data.errors[i]), pct(data.timeouts[i])]
        .forEach((text) => tr.appendChild(cell(text, true)));
      const flagged = cell("", false);
      Object.entries(data.flags).forEach(([name, values]) => {
        if (!values[i]) return;
        const span = document.createElement("span");
        span.className = "flag";
        span.textContent = name + " " + pct(values[i]);
        flagged.append(span, " ");
      });
      tr.appendChild(flagged);
      rows.appendChild(tr);
    });
    body.appendChild(rows);
  }
})();
