// A dashboard chart drawn by the browser from its figure (`figure`: plotly's JSON, data and
// layout) with the plotly.js the page already holds: plotly's FigureWidget sets `window.Plotly`
// when its code loads (the learning curves' chart loads it). A FigureWidget of its own would
// bring 5 MB of code to load again, seconds before its tab could show.
//
// Drawn once in its hidden tab as soon as plotly.js is there (a WebGL chart's first drawing
// costs a second without a GPU: its contexts and shaders), and then again only when it shows
// and its figure changed meanwhile (a redraw in a few hundred ms), so that opening the tab shows
// it at once. Where the page has no plotly.js when the tab shows, the kernel sends it (once).

let asked = null;

function plotlyFromKernel(model) {
  if (!asked) {
    asked = new Promise((resolve, reject) => {
      const heard = async (message, buffers) => {
        if (message.type !== "plotly") return;
        model.off("msg:custom", heard);
        const url = URL.createObjectURL(new Blob([buffers[0]], { type: "text/javascript" }));
        try {
          await import(url); // plotly.js sets window.Plotly
          resolve(window.Plotly);
        } catch (error) {
          asked = null;
          reject(error);
        } finally {
          URL.revokeObjectURL(url);
        }
      };
      model.on("msg:custom", heard);
      model.send({ type: "plotly" });
    });
  }
  return asked;
}

function quietMoment() {
  return new Promise((resolve) => {
    if (window.requestIdleCallback) window.requestIdleCallback(() => resolve(), { timeout: 1000 });
    else setTimeout(resolve, 500);
  });
}

// Charts drawn ahead take their turn, one in the whole page at a time and each at a quiet
// moment: a page showing several dashboards at once has other widgets to set up meanwhile, and
// anywidget gives each model two seconds to be ready (one that is not never shows).
function inTurn(work) {
  const turn = (window.nbtuneDrawingAhead || Promise.resolve()).then(quietMoment).then(work);
  window.nbtuneDrawingAhead = turn.catch(() => {});
  return turn;
}

// The width the chart has where it is, or (hidden in its tab) the width the visible tab's chart
// has: each tab's chart sits in the same place.
function roomFor(el) {
  if (el.clientWidth) return el.clientWidth;
  const dashboard = el.closest(".nbtune-dashboard");
  const panel = dashboard && dashboard.querySelector(".widget-tab-contents > :not(.lm-mod-hidden)");
  const chart = panel && panel.querySelector(".js-plotly-plot");
  return chart ? chart.parentElement.clientWidth : 0;
}

function render({ model, el }) {
  const chart = document.createElement("div");
  chart.className = "nbtune-browser-chart";
  el.appendChild(chart);
  let drawn = null; // [figure, width] last drawn
  let drawing = null;
  let again = false;
  // A page keeps about 16 WebGL contexts and takes the oldest back past that: with several
  // dashboards in a notebook, a chart may lose its own. Drawn afresh once it shows and is in
  // view (not while hidden or scrolled away, which would take another chart's in turn), once
  // each time it comes into view: charts in view do not take each other's contexts forever.
  let lost = false;
  let inView = false;
  let redrawnInView = false;
  const drawAfresh = () => {
    if (!lost || !inView || redrawnInView) return;
    redrawnInView = true;
    redraw();
  };
  chart.addEventListener("webglcontextlost", () => {
    lost = true;
    drawn = null;
    markStale();
    drawAfresh();
  }, true);
  const watched = new IntersectionObserver((entries) => {
    inView = entries[entries.length - 1].isIntersecting;
    if (!inView) redrawnInView = false;
    drawAfresh();
  });
  watched.observe(el);

  // `data-stale` on the chart while what it shows is older than its figure (drawn in its
  // hidden tab, the figure changed since): it shows it for the moment a redraw takes.
  function markStale() {
    chart.dataset.stale = String(!drawn || drawn[0] !== model.get("figure"));
  }

  // Hidden, a chart is drawn once, ahead and in its turn; again when it shows.
  const drawnAhead = () => el.offsetParent === null && (drawn || lost);
  function draw() {
    if (!(model.get("figure") || {}).data || drawnAhead()) return null;
    if (el.offsetParent !== null) return drawNow();
    return inTurn(() => (drawnAhead() ? null : drawNow()));
  }

  async function drawNow() {
    const figure = model.get("figure");
    const shown = el.offsetParent !== null;
    const plotly = window.Plotly || (shown ? await plotlyFromKernel(model) : null);
    const width = roomFor(el);
    if (!plotly || width < 100) return;
    if (drawn && drawn[0] === figure && drawn[1] === width) return;
    if (lost) {
      plotly.purge(chart);
      lost = false;
    }
    const layout = { ...figure.layout, width, autosize: false };
    await plotly.react(chart, figure.data, layout, { displaylogo: false });
    drawn = [figure, width];
    markStale();
    chart.dispatchEvent(new CustomEvent("nbtune-chart-drawn", { bubbles: true, detail: { width } }));
  }

  // One drawing at a time; a change meanwhile draws once more after it.
  function redraw() {
    if (drawing) {
      again = true;
      return;
    }
    drawing = Promise.resolve(draw())
      .catch((error) => console.error("nbtune: chart not drawn", error))
      .finally(() => {
        drawing = null;
        if (again) {
          again = false;
          redraw();
        }
      });
  }

  const changed = () => {
    markStale();
    redraw();
  };
  document.addEventListener("plotlywidget-after-render", redraw);
  model.on("change:figure", changed);
  const resized = new ResizeObserver(redraw); // shown, hidden, or a new width
  resized.observe(el);
  markStale();
  redraw();
  return () => {
    resized.disconnect();
    watched.disconnect();
    document.removeEventListener("plotlywidget-after-render", redraw);
    model.off("change:figure", changed);
    if (window.Plotly) window.Plotly.purge(chart);
  };
}

export default { render };
