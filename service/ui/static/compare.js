// The evaluation comparison's chart (Chart.js, vendored), from the page's JSON data block.
(function () {
  "use strict";
  const source = document.getElementById("compare-data");
  const canvas = document.getElementById("compare-chart");
  if (!source || !canvas || typeof Chart === "undefined") return;
  const data = JSON.parse(source.textContent);
  Chart.defaults.animation = false;
  Chart.defaults.maintainAspectRatio = false;
  new Chart(canvas, {
    type: "bar",
    data: {
      labels: data.labels,
      datasets: [
        { label: data.a_name, data: data.a, backgroundColor: "#90a4ae" },
        { label: data.b_name, data: data.b, backgroundColor: "#1565c0" },
      ],
    },
    options: { scales: { y: { min: 0, max: 1, ticks: { callback: (v) => Math.round(v * 100) + "%" } } } },
  });
  document.body.dataset.chartsDrawn = "1";
})();
