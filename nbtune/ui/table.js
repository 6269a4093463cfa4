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
    tr.addEventListener("mouseenter", () => model.send({ type: "hover", trial_id: id }));
    tr.addEventListener("mouseleave", () => model.send({ type: "hover", trial_id: null }));
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

  const tellTheme = () => model.send({ type: "rendered", dark: isDark() });
  const observer = new MutationObserver(tellTheme);
  observer.observe(document.body, { attributes: true, attributeFilter: ["data-jp-theme-light", "class"] });
  for (const name of ["table", "sort", "descending", "status", "selected", "highlighted"]) {
    model.on(`change:${name}`, draw);
  }
  draw();
  tellTheme();
  return () => observer.disconnect();
}

export default { render };
