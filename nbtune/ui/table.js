// nbtune's trials table, drawn by anywidget. Python computes the page (`table`: columns and
// rows); this file only draws it and sends the user's clicks back as messages.

function isDark() {
  const body = document.body;
  if (body.dataset.jpThemeLight !== undefined) return body.dataset.jpThemeLight === "false";
  return body.classList.contains("vscode-dark") || body.classList.contains("theme-dark");
}

function element(tag, attributes = {}, text = "") {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) node.setAttribute(name, value);
  if (text) node.textContent = text;
  return node;
}

// The dashboard's plotly charts, steered from here without a kernel round trip. Each is a
// plotly FigureWidget whose browser side applies a "_py2js_restyle" or "_py2js_relayout"
// change event to every view it has; raising that event here (the value set on the model's
// attributes, not through `set`, so that nothing is sent back to the kernel) restyles or
// resizes the chart at once. The kernel never hears of it: its own updates leave the width
// and the hover's styles alone, and the edit id -1 makes it ignore the deltas plotly reports.
function steer(figure, kind, data, traces) {
  const name = `_py2js_${kind}`;
  const message = kind === "restyle"
    ? { restyle_data: data, restyle_traces: traces, trace_edit_id: -1, source_view_id: null }
    : { relayout_data: data, layout_edit_id: -1, source_view_id: null };
  const before = figure.attributes[name];
  figure.attributes[name] = message;
  try {
    figure.trigger(`change:${name}`, figure, message);
  } finally {
    figure.attributes[name] = before;
  }
}

// How wide the dashboard's charts may be: the visible tab's width, less the margins of the
// chart in it (plotly would draw at its default 700 px, and only follow a window's resize).
function chartWidth(dashboard) {
  const panel = dashboard && dashboard.querySelector(".widget-tab-contents > :not(.lm-mod-hidden)");
  if (!panel || !panel.clientWidth) return 0;
  const chart = panel.querySelector(".js-plotly-plot");
  const holder = chart ? chart.parentElement : panel;
  const style = getComputedStyle(chart || holder);
  const margins = chart ? parseFloat(style.marginLeft) + parseFloat(style.marginRight) : 8;
  const padding = chart ? 0 : parseFloat(style.paddingLeft) + parseFloat(style.paddingRight);
  return Math.floor(holder.clientWidth - margins - padding);
}

function render({ model, el }) {
  const root = element("div", { class: "nbtune-table" });
  el.appendChild(root);

  const toolbar = element("div", { class: "nbtune-toolbar" });
  const filter = element("select", { class: "nbtune-filter", title: "show trials of one status" });
  for (const status of ["all", "running", "pending", "paused", "terminated", "error"]) {
    filter.appendChild(element("option", { value: status }, status));
  }
  filter.addEventListener("change", () => model.send({ type: "filter", status: filter.value }));
  const previous = element("button", { class: "nbtune-page", "data-step": "-1" }, "◀");
  const next = element("button", { class: "nbtune-page", "data-step": "1" }, "▶");
  const where = element("span", { class: "nbtune-where" });
  for (const button of [previous, next]) {
    button.addEventListener("click", () => model.send({ type: "page", step: Number(button.dataset.step) }));
  }
  toolbar.append(element("span", {}, "show "), filter, previous, where, next);

  const scroller = element("div", { class: "nbtune-scroller" });
  const table = element("table");
  scroller.appendChild(table);
  root.append(toolbar, scroller);

  function heading(column) {
    const sort = model.get("sort");
    const arrow = column.key === sort ? (model.get("descending") ? " ▼" : " ▲") : "";
    const th = element("th", { "data-key": column.key, title: `sort by ${column.label}` }, column.label + arrow);
    if (column.numeric) th.classList.add("nbtune-number");
    th.addEventListener("click", () => model.send({ type: "sort", key: column.key }));
    return th;
  }

  // Lines are kept by trial id and updated in place: a redraw (ten a second in a live run)
  // changes text, not elements, so a click held on a line or its button is never lost.
  const lines = new Map();
  let columnKeys = "";
  // One line, kept, that says why the table is empty ("no paused trials (of 64): ...").
  const emptyCell = element("td", { class: "nbtune-empty" });
  const emptyLine = element("tr");
  emptyLine.appendChild(emptyCell);

  function newLine(id, columns) {
    const tr = element("tr", { "data-trial": String(id) });
    const cells = {};
    for (const column of columns) {
      const td = element("td", { "data-key": column.key });
      if (column.numeric) td.classList.add("nbtune-number");
      if (column.key.startsWith("config/")) td.classList.add("nbtune-config");
      if (column.key === "status") {
        td.append(element("span", { class: "nbtune-badge" }), element("span", { class: "nbtune-note" }));
      } else if (column.key === "id") {
        td.append(element("span", { class: "nbtune-swatch", title: "its colour in the charts" }), "");
      }
      cells[column.key] = td;
      tr.appendChild(td);
    }
    const actions = element("td", { class: "nbtune-actions" });
    const buttons = {};
    for (const action of ["pause", "resume", "stop"]) {
      const label = action[0].toUpperCase() + action.slice(1);
      const button = element("button", { "data-action": action, title: `${label} trial ${id}` }, label);
      button.addEventListener("click", (event) => {
        event.stopPropagation();
        model.send({ type: "action", action, trial_id: id });
      });
      buttons[action] = button;
      actions.appendChild(button);
    }
    tr.appendChild(actions);
    tr.addEventListener("mouseenter", () => charts.highlight(id));
    tr.addEventListener("mouseleave", () => charts.highlight(null));
    tr.addEventListener("click", () => model.send({ type: "select", trial_id: id }));
    return { tr, cells, buttons };
  }

  function setText(node, text) {
    if (node.textContent !== text) node.textContent = text;
  }

  function update(line, row) {
    const title = row.infeasible ? `infeasible: ${row.infeasible}\n${row.config}` : row.config;
    if (line.tr.title !== title) line.tr.title = title;
    line.tr.classList.toggle("nbtune-infeasible", Boolean(row.infeasible));
    line.tr.classList.toggle("nbtune-selected", row.id === model.get("selected"));
    line.tr.classList.toggle("nbtune-highlighted", row.id === model.get("highlighted"));
    for (const [key, td] of Object.entries(line.cells)) {
      const text = row.cells[key] ?? "";
      if (key === "status") {
        const badge = td.firstChild;
        setText(badge, text);
        badge.style.background = row.color;
        setText(td.lastChild, row.note || "");
      } else if (key === "id") {
        td.firstChild.style.background = row.swatch;
        if (td.lastChild.nodeValue !== text) td.lastChild.nodeValue = text;
      } else {
        setText(td, text);
      }
    }
    for (const [action, button] of Object.entries(line.buttons)) {
      button.classList.toggle("nbtune-hidden", !row.actions.includes(action));
    }
  }

  function draw() {
    const state = model.get("table") || {};
    const columns = state.columns || [];
    const keys = columns.map((column) => column.key).join("\n");
    let body = table.tBodies[0];
    if (keys !== columnKeys || !body) {
      columnKeys = keys;
      lines.clear();
      body = element("tbody");
      table.replaceChildren(element("thead"), body);
    }
    const headRow = element("tr");
    for (const column of columns) headRow.appendChild(heading(column));
    headRow.appendChild(element("th", { class: "nbtune-actions" }, "actions"));
    const head = table.tHead;
    if (!head.firstChild || head.firstChild.textContent !== headRow.textContent) {
      head.replaceChildren(headRow);
    }
    const shown = new Set();
    let before = body.firstChild;
    for (const row of state.rows || []) {
      let line = lines.get(row.id);
      if (!line) {
        line = newLine(row.id, columns);
        lines.set(row.id, line);
      }
      update(line, row);
      shown.add(row.id);
      if (line.tr !== before) body.insertBefore(line.tr, before);
      else before = before.nextSibling;
    }
    for (const [id, line] of lines) {
      if (!shown.has(id)) {
        line.tr.remove();
        lines.delete(id);
      }
    }
    const empty = !(state.rows || []).length && state.empty ? state.empty : "";
    if (empty) {
      emptyCell.colSpan = columns.length + 1;
      setText(emptyCell, empty);
      if (emptyLine.parentNode !== body) body.appendChild(emptyLine);
    } else if (emptyLine.parentNode) {
      emptyLine.remove();
    }
    filter.value = model.get("status");
    setText(where, state.footer || "");
    previous.disabled = !state.page;
    next.disabled = state.page >= (state.pages || 1) - 1;
  }

  const charts = chartSteering(model, el);
  const tellTheme = () => model.send({ type: "rendered", dark: isDark() });
  const observer = new MutationObserver(tellTheme);
  observer.observe(document.body, { attributes: true, attributeFilter: ["data-jp-theme-light", "class"] });
  for (const name of ["table", "sort", "descending", "status", "selected", "highlighted"]) {
    model.on(`change:${name}`, draw);
  }
  model.on("change:table", charts.fitNew);
  model.on("change:charts", charts.fit);
  draw();
  tellTheme();
  return () => {
    observer.disconnect();
    charts.close();
  };
}

// The table's hold on the dashboard's live charts (`model.get("charts")`: their model ids by
// tab): their width, and the curve of the trial under the mouse drawn bold. Where a chart is
// not a FigureWidget (static charts), the kernel draws the highlight: the hover goes to it.
function chartSteering(model, el) {
  const figures = new Map();
  const widths = new Map();
  const overlaid = new Set();
  let highlighted = null;

  async function figure(name) {
    const id = (model.get("charts") || {})[name];
    if (!id) return null;
    if (!figures.has(id)) figures.set(id, model.widget_manager.get_model(id).catch(() => null));
    return figures.get(id);
  }

  async function fit() {
    const width = chartWidth(el.closest(".nbtune-dashboard"));
    if (width < 100) return;
    for (const [name, id] of Object.entries(model.get("charts") || {})) {
      const chart = await figure(name);
      const layout = chart && chart.get("_widget_layout");
      if (!layout) continue;
      fitted.add(id);
      if (layout.width === width && widths.get(chart) === width) continue;
      widths.set(chart, width);
      layout.width = width; // a view drawn from now on starts at this width
      steer(chart, "relayout", { width }); // the views drawn already
    }
  }

  // Fit the charts not fitted yet. A table redraw (ten a second) measured the page each time,
  // which made the browser lay it out at once: the page's width is followed by `resized`.
  const fitted = new Set();
  function fitNew() {
    if (Object.values(model.get("charts") || {}).some((id) => !fitted.has(id))) fit();
  }

  // Restyle the chart as drawn, leaving the model's copy of the kernel's figure as it was, so
  // that the kernel's style can always be drawn back, however it changed meanwhile.
  function drawOnly(chart, style, traces) {
    const data = chart.get("_widget_data") || [];
    const keys = [...new Set(Object.keys(style).map((key) => key.split(".")[0]))];
    const kept = traces.map((index) => keys.map((key) => data[index][key]));
    steer(chart, "restyle", style, traces);
    traces.forEach((index, at) => keys.forEach((key, k) => {
      if (kept[at][k] === undefined) delete data[index][key];
      else data[index][key] = kept[at][k];
    }));
  }

  // The chart as drawn: the plotly graph of one of its views, whose curves plotly.js keeps as
  // the kernel drew them. Not the model's copy of the figure (`_widget_data`): plotly's browser
  // code writes the placeholders of its updates into it ("_undefined_" for a value an update
  // leaves as it was), so curves lost their names there.
  async function drawnGraph(chart) {
    const views = await Promise.all(Object.values(chart.views || {}));
    const view = views.find((v) => v && v.el && v.el.isConnected && Array.isArray(v.el.data));
    return view ? view.el : null;
  }

  // A curve the kernel bundled with others (past 50 curves, `nbtune.ui.bundles`) has no trace
  // of its own: its points, picked out of its bundle, are drawn into the empty trace the kernel
  // keeps last for it (named "highlight"), emptied again afterwards. Returns the index of the
  // trace that draws trial `id` (null: none).
  function overlay(chart, data, id) {
    const last = data.length - 1;
    // named "trial <id>" while it draws one (the drawn graph keeps the overlay's restyle)
    if (last < 0 || (data[last].name !== "highlight" && !overlaid.has(chart))) return null;
    const xs = [];
    const ys = [];
    const bundle = id === null ? null : data.find((trace) => (trace.customdata || []).includes(id));
    if (bundle) {
      bundle.customdata.forEach((owner, i) => {
        if (owner === id) xs.push(bundle.x[i]), ys.push(bundle.y[i]);
      });
    }
    if (xs.length || overlaid.has(chart)) {
      if (xs.length) overlaid.add(chart);
      else overlaid.delete(chart);
      drawOnly(chart, { x: [xs], y: [ys], name: [xs.length ? `trial ${id}` : "highlight"] }, [last]);
    }
    return xs.length ? last : null;
  }

  // The highlight is drawn by the page's style sheet (table.css), not by plotly: the chart's
  // SVG gets "nbtune-dimmed", which fades every curve, the highlighted trial's curve
  // "nbtune-bold" and its forecast "nbtune-kept". Plotly draws nothing again and the kernel
  // hears nothing: a line hovered costs a restyle of the page, however many curves there are.
  async function draw(chart) {
    const graph = await drawnGraph(chart);
    if (!graph) return;
    const overlayAt = overlaid.has(chart) ? graph.data.length - 1 : -1;
    const name = `trial ${highlighted}`;
    const own = graph.data.findIndex((trace, i) => i !== overlayAt && trace.name === name);
    const bundled = highlighted !== null && own < 0;
    shown = overlay(chart, graph.data, bundled ? highlighted : null) ?? own;
    mark(graph);
    if (graph.on && !plots.has(graph)) {
      plots.add(graph);
      graph.on("plotly_afterplot", () => highlighted !== null && mark(graph));
    }
  }

  // Put the classes where they belong now, changing none that are already right; after the
  // hover, and after every drawing plotly makes (it may draw the curves' elements anew).
  let shown = -1;
  function mark(graph) {
    const root = el.closest(".nbtune-dashboard") || document;
    const data = graph.data;
    const name = `trial ${highlighted}`;
    const forecast = data.findIndex((trace) => trace.name === `${name} forecast`);
    const wanted = new Map();
    const row = ((model.get("table") || {}).rows || []).find((r) => r.id === highlighted);
    for (const [index, kind] of [[shown, "nbtune-bold"], [forecast, "nbtune-kept"]]) {
      const uid = highlighted !== null && index >= 0 && data[index] && data[index].uid;
      const curve = uid && root.querySelector(`.scatterlayer .trace${uid}`);
      if (!curve) continue;
      wanted.set(curve, kind);
      wanted.set(curve.closest(".js-plotly-plot"), "nbtune-dimmed");
      const color = row ? row.swatch : ((curve.__data__ || [{}])[0].trace || { line: {} }).line.color;
      if (color && curve.style.getPropertyValue("--nbtune-bold-color") !== color) {
        curve.style.setProperty("--nbtune-bold-color", color);
      }
    }
    for (const node of root.querySelectorAll(".nbtune-dimmed, .nbtune-bold, .nbtune-kept")) {
      for (const kind of ["nbtune-dimmed", "nbtune-bold", "nbtune-kept"]) {
        if (node.classList.contains(kind) && wanted.get(node) !== kind) node.classList.remove(kind);
      }
    }
    for (const [node, kind] of wanted) if (!node.classList.contains(kind)) node.classList.add(kind);
  }
  const plots = new WeakSet();

  const followed = new Set();
  async function highlight(id) {
    highlighted = id;
    const chart = await figure("learning curves");
    if (highlighted !== id) return;
    if (!chart) {
      model.send({ type: "hover", trial_id: id });
      return;
    }
    if (!followed.has(chart)) {
      // The kernel's drawings move curves from trace to trace and add traces: mark the
      // highlighted curve again after each. Not after the highlight's own restyle (edit id -1,
      // see `steer`): that drew it again, and again, as long as the mouse stayed on a line.
      followed.add(chart);
      const again = (_, message) => {
        if (message && message.trace_edit_id !== -1) setTimeout(() => highlighted !== null && draw(chart));
      };
      const drawings = ["update", "restyle", "addTraces", "deleteTraces"];
      chart.on(drawings.map((kind) => `change:_py2js_${kind}`).join(" "), again);
    }
    draw(chart);
  }

  const resized = new ResizeObserver(() => fit());
  resized.observe(el);
  return { fit, fitNew, highlight, close: () => resized.disconnect() };
}

export default { render };
