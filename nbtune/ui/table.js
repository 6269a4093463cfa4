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

  function line(row, columns) {
    const tr = element("tr", { "data-trial": String(row.id), title: row.config });
    if (row.id === model.get("selected")) tr.classList.add("nbtune-selected");
    if (row.id === model.get("highlighted")) tr.classList.add("nbtune-highlighted");
    for (const column of columns) {
      const td = element("td", { "data-key": column.key });
      if (column.key === "status") {
        const badge = element("span", { class: "nbtune-badge" }, row.cells.status);
        badge.style.background = row.color;
        td.appendChild(badge);
      } else if (column.key === "id") {
        const swatch = element("span", { class: "nbtune-swatch", title: "its colour in the charts" });
        swatch.style.background = row.swatch;
        td.append(swatch, row.cells.id);
      } else {
        td.textContent = row.cells[column.key] ?? "";
      }
      if (column.numeric) td.classList.add("nbtune-number");
      if (column.key.startsWith("config/")) td.classList.add("nbtune-config");
      tr.appendChild(td);
    }
    const actions = element("td", { class: "nbtune-actions" });
    for (const action of ["pause", "resume", "stop"]) {
      const label = action[0].toUpperCase() + action.slice(1);
      const button = element("button", { "data-action": action, title: `${label} trial ${row.id}` }, label);
      if (!row.actions.includes(action)) button.classList.add("nbtune-hidden");
      button.addEventListener("click", (event) => {
        event.stopPropagation();
        model.send({ type: "action", action, trial_id: row.id });
      });
      actions.appendChild(button);
    }
    tr.appendChild(actions);
    tr.addEventListener("mouseenter", () => model.send({ type: "hover", trial_id: row.id }));
    tr.addEventListener("mouseleave", () => model.send({ type: "hover", trial_id: null }));
    tr.addEventListener("click", () => model.send({ type: "select", trial_id: row.id }));
    return tr;
  }

  function draw() {
    const state = model.get("table") || {};
    const columns = state.columns || [];
    const head = element("thead");
    const headRow = element("tr");
    for (const column of columns) headRow.appendChild(heading(column));
    headRow.appendChild(element("th", { class: "nbtune-actions" }, "actions"));
    head.appendChild(headRow);
    const body = element("tbody");
    for (const row of state.rows || []) body.appendChild(line(row, columns));
    table.replaceChildren(head, body);
    filter.value = model.get("status");
    where.textContent = state.footer || "";
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
