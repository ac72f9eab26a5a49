// Live updates for the dashboard's pages: step states by polling, and training curves.
"use strict";
const marinDashboard = (() => {
  async function getJSON(url) {
    const response = await fetch(url, { credentials: "same-origin", cache: "no-store" });
    const body = await response.json();
    if (!response.ok) throw new Error(body.error || response.statusText);
    return body;
  }

  function setLive(ok, text) {
    const live = document.getElementById("live");
    if (!live) return;
    live.textContent = text;
    live.classList.toggle("stale", !ok);
  }

  // Every element with data-key (graph nodes, table rows) follows its step's state.
  function applyStates(data) {
    for (const el of document.querySelectorAll("[data-key]")) {
      const entry = data.states[el.dataset.key];
      if (!entry) continue;
      const [state, took, error] = entry;
      if (el.dataset.state !== state) {
        el.dataset.state = state;
        for (const badge of el.querySelectorAll(".badge, .node-state")) {
          badge.dataset.state = state;
          badge.textContent = state;
        }
        const title = el.querySelector("title");
        if (title) title.textContent = `${el.dataset.key}: ${state}${error ? " · " + error : ""}`;
      }
    }
    for (const el of document.querySelectorAll("[data-dur-key]")) {
      const entry = data.states[el.dataset.durKey];
      if (entry) el.textContent = entry[1];
    }
    for (const el of document.querySelectorAll("[data-err-key]")) {
      const entry = data.states[el.dataset.errKey];
      if (entry) el.textContent = entry[2];
    }
    for (const el of document.querySelectorAll(".summary [data-count]")) {
      el.textContent = data.counts[el.dataset.count] || 0;
    }
  }

  function pollStates(url, seconds) {
    const tick = async () => {
      try {
        applyStates(await getJSON(url));
        setLive(true, "live · " + new Date().toLocaleTimeString());
      } catch (error) {
        setLive(false, "update failed: " + error.message);
      }
      setTimeout(tick, seconds * 1000);
    };
    setTimeout(tick, seconds * 1000);
  }

  function plotMetrics(data, chosen) {
    for (const div of document.querySelectorAll(".chart")) {
      const metric = div.dataset.metric;
      const traces = [];
      for (const key of chosen) {
        const run = data.runs[key];
        if (!run) continue;
        const [x, y] = run.series[metric];
        traces.push({ x, y, name: key, mode: x.length > 60 ? "lines" : "lines+markers",
                      type: "scatter" });
      }
      const hasData = traces.some((t) => t.x.length);
      const layout = {
        title: { text: div.dataset.label + (hasData ? "" : " (no data)"), font: { size: 14 } },
        margin: { l: 60, r: 10, t: 40, b: chosen.length > 1 ? 90 : 45 },
        xaxis: { title: { text: "step" } },
        yaxis: { type: metric === "loss" || metric === "eval_loss" ? "log" : "linear" },
        showlegend: chosen.length > 1, legend: { orientation: "h", y: -0.32 },
      };
      Plotly.react(div, traces, layout, { displaylogo: false, responsive: true });
    }
  }

  function runCharts(chosen, seconds) {
    const initial = JSON.parse(document.getElementById("metrics-data").textContent);
    plotMetrics(initial, chosen);
    for (const toggle of document.querySelectorAll(".group-toggle")) {
      toggle.addEventListener("change", () => {
        for (const box of document.querySelectorAll(`input[name=run]`)) {
          if (box.dataset.group === toggle.dataset.group) box.checked = toggle.checked;
        }
      });
    }
    const query = chosen.map((k) => "run=" + encodeURIComponent(k)).join("&");
    const active = (data) => Object.values(data.runs).some((r) => r.state === "RUNNING");
    let live = active(initial);
    const tick = async () => {
      if (!live) return;
      try {
        const data = await getJSON("/api/metrics?" + query);
        plotMetrics(data, chosen);
        live = active(data);
      } catch (error) {
        console.warn("metrics update failed", error);
      }
      setTimeout(tick, seconds * 1000);
    };
    setTimeout(tick, seconds * 1000);
  }

  return { pollStates, runCharts };
})();
