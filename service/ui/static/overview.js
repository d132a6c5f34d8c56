// Draws the overview's charts with Chart.js (vendored) from the JSON data block the page carries.
(function () {
  "use strict";
  const source = document.getElementById("overview-data");
  if (!source || typeof Chart === "undefined") return;
  const data = JSON.parse(source.textContent);
  const COLORS = {
    correct: "#2e7d32", incorrect: "#c62828", invalid_format: "#ef6c00", violation: "#6a1b9a",
    timeout: "#00838f", error: "#424242",
  };
  const PALETTE = ["#1565c0", "#ad1457", "#f9a825", "#00695c", "#4e342e", "#5e35b1", "#9e9d24", "#d84315"];
  Chart.defaults.animation = false;
  Chart.defaults.maintainAspectRatio = false;
  const byName = Object.fromEntries(data.verifiers.map((v) => [v.name, v]));
  const percent = { min: 0, max: 1, ticks: { callback: (v) => Math.round(v * 100) + "%" } };
  const rate = { min: 0, suggestedMax: 0.1, ticks: { callback: (v) => Math.round(v * 1000) / 10 + "%" } };
  // "2026-11-23T12:00+00:00" -> "11-23 12:00"
  const when = (b) => b.start.slice(5, 16).replace("T", " ");

  function verdicts(v) {
    return {
      type: "bar",
      data: {
        labels: v.buckets.map(when),
        datasets: data.verdicts.map((name) => ({
          label: name, data: v.buckets.map((b) => b.rates[name]), backgroundColor: COLORS[name],
        })),
      },
      options: { scales: { x: { stacked: true }, y: { stacked: true, ...percent } } },
    };
  }
  function rates(v) {
    const flags = Object.keys(v.flag_rates);
    const series = [
      { label: "error", data: v.buckets.map((b) => b.rates.error), borderColor: COLORS.error },
      { label: "timeout", data: v.buckets.map((b) => b.rates.timeout), borderColor: COLORS.timeout },
      { label: "zero-variance groups", data: v.buckets.map((b) => b.zero_variance_share), borderColor: "#8d6e63",
        borderDash: [6, 3] },
    ].concat(flags.slice(0, PALETTE.length).map((flag, i) => ({
      label: "flag " + flag, data: v.buckets.map((b) => b.flag_rates[flag] || 0), borderColor: PALETTE[i],
    })));
    return {
      type: "line",
      data: { labels: v.buckets.map(when), datasets: series },
      options: { spanGaps: true, scales: { y: rate } },
    };
  }
  function latency(v) {
    return {
      type: "line",
      data: {
        labels: v.buckets.map(when),
        datasets: data.percentiles.map((q, i) => ({
          label: "p" + Math.round(q * 100), borderColor: PALETTE[i],
          data: v.buckets.map((b) => (b.latency_ms ? b.latency_ms[i] : null)),
        })),
      },
      options: { spanGaps: true, scales: { y: { beginAtZero: true } } },
    };
  }
  function length(v) {
    return {
      type: "bar",
      data: {
        labels: v.lengths.map((row) => "≥ " + row.min_chars),
        datasets: [{ label: "accuracy", data: v.lengths.map((row) => row.accuracy), backgroundColor: COLORS.correct }],
      },
      options: {
        scales: { y: percent },
        plugins: { tooltip: { callbacks: { afterLabel: (ctx) => "n = " + v.lengths[ctx.dataIndex].n } } },
      },
    };
  }
  const KINDS = { verdicts, rates, latency, length };
  document.querySelectorAll("canvas[data-chart]").forEach((canvas) => {
    const v = byName[canvas.dataset.verifier];
    const make = KINDS[canvas.dataset.chart];
    if (v && make) new Chart(canvas, make(v));
  });
  document.body.dataset.chartsDrawn = String(document.querySelectorAll("canvas[data-chart]").length);
})();
