// The widget's CSS. Colours come from JupyterLab's theme variables, so the widget follows
// light and dark themes; where they are missing (marimo) the fallbacks (`JP`) follow the
// page's colour scheme.

/** JupyterLab's theme colours, each with the fallback used where a front-end does not define
 * it: JupyterLab's light value, or its dark one (as render/html.py writes them) where the page
 * declares a dark colour scheme: marimo's dark theme sets `color-scheme: dark` and no --jp-*
 * variable, and a light fallback there drew dark text on its dark page. */
export const JP = {
  layout0: "var(--jp-layout-color0, light-dark(#ffffff, #111111))",
  layout1: "var(--jp-layout-color1, light-dark(#ffffff, #212121))",
  layout2: "var(--jp-layout-color2, light-dark(#eeeeee, #424242))",
  font0: "var(--jp-ui-font-color0, light-dark(#000000de, #ffffff))",
  font1: "var(--jp-ui-font-color1, light-dark(#000000de, #ffffffde))",
  font2: "var(--jp-ui-font-color2, light-dark(#0000008a, #ffffff8a))",
  border1: "var(--jp-border-color1, light-dark(#bdbdbd, #616161))",
  border2: "var(--jp-border-color2, light-dark(#e0e0e0, #424242))",
  brand1: "var(--jp-brand-color1, light-dark(#1976d2, #42a5f5))",
  warn1: "var(--jp-warn-color1, light-dark(#f57c00, #ffb74d))",
  error1: "var(--jp-error-color1, light-dark(#d32f2f, #ef5350))",
};

/** The details panel sits beside the table in a widget wider than this (px), else below it. */
export const DETAIL_BESIDE_FROM = 1360;
const DETAIL = 320; // the details panel's width beside the table (px)
const GAP = 10;
/** The width the details panel and the gap before it take when beside the table (px). */
export const DETAIL_BESIDE_WIDTH = DETAIL + GAP;

export const STYLES = `
.nbi {
  --nbi-bg: ${JP.layout0};
  --nbi-bg-alt: ${JP.layout1};
  --nbi-bg-head: ${JP.layout2};
  --nbi-fg: ${JP.font0};
  --nbi-fg-dim: ${JP.font2};
  --nbi-border: ${JP.border2};
  --nbi-accent: ${JP.brand1};
  --nbi-warn: ${JP.warn1};
  font-family: var(--jp-ui-font-family, system-ui, -apple-system, "Segoe UI", Roboto, sans-serif);
  font-size: var(--jp-ui-font-size1, 13px);
  color: var(--nbi-fg);
  background: var(--nbi-bg);
  line-height: 1.3;
  container-type: inline-size;
}
.nbi *, .nbi *::before, .nbi *::after { box-sizing: border-box; }
.nbi-header { display: flex; flex-wrap: wrap; align-items: baseline; gap: 6px 10px; margin: 0 0 6px; }
.nbi-model { font-size: 1.25em; font-weight: 600; }
.nbi-framework { color: var(--nbi-fg-dim); font-size: .9em; }
.nbi-totals { display: flex; flex-wrap: wrap; gap: 6px; margin-left: auto; }
.nbi-total { display: inline-flex; gap: 5px; align-items: baseline; padding: 2px 8px; border: 1px solid var(--nbi-border);
  border-radius: 10px; background: var(--nbi-bg-alt); }
.nbi-total-label { color: var(--nbi-fg-dim); font-size: .85em; }
.nbi-total-value { font-weight: 600; font-variant-numeric: tabular-nums; }
.nbi-toolbar { display: flex; flex-wrap: wrap; gap: 6px; align-items: center; margin: 0 0 6px; }
.nbi-search, .nbi-toolbar select, .nbi-button {
  font: inherit; color: var(--nbi-fg); background: var(--nbi-bg-alt); border: 1px solid var(--nbi-border);
  border-radius: 4px; padding: 3px 8px; min-height: 26px; }
.nbi-search { min-width: 200px; flex: 0 1 260px; }
.nbi-button { cursor: pointer; }
.nbi-button:hover, .nbi-toolbar select:hover { border-color: var(--nbi-accent); }
.nbi :focus-visible { outline: 2px solid var(--nbi-accent); outline-offset: -2px; }
.nbi-columns { position: relative; }
.nbi-columns > summary { list-style: none; display: inline-block; }
.nbi-columns > summary::-webkit-details-marker { display: none; }
.nbi-columns-list { position: absolute; z-index: 5; top: 30px; left: 0; display: grid; gap: 2px; padding: 6px 10px;
  background: var(--nbi-bg-alt); border: 1px solid var(--nbi-border); border-radius: 4px; box-shadow: 0 2px 8px rgba(0,0,0,.2);
  white-space: nowrap; }
.nbi-columns-list label { display: flex; align-items: center; gap: 6px; cursor: pointer; }
.nbi-columns-list input { margin: 0; }
.nbi-main { display: flex; gap: ${GAP}px; align-items: flex-start; }
.nbi-grid { position: relative; flex: 1 1 auto; min-width: 0; overflow: auto; border: 1px solid var(--nbi-border);
  border-radius: 4px; background: var(--nbi-bg); contain: strict; min-height: 60px; }
.nbi-grid:focus { outline: none; }
.nbi-grid:focus-visible { box-shadow: 0 0 0 2px var(--nbi-accent) inset; }
.nbi-head { position: sticky; top: 0; z-index: 2; min-width: max-content; }
.nbi-body { position: relative; min-width: max-content; }
.nbi-row { display: grid; align-items: center; height: ${24}px; min-width: 100%; }
.nbi-body > .nbi-row { position: absolute; top: 0; left: 0; right: 0; border-bottom: 1px solid var(--nbi-border); cursor: default;
  background: var(--nbi-bg); }
.nbi-head-row { height: 28px; background: var(--nbi-bg-head); border-bottom: 1px solid var(--nbi-border); }
.nbi-body > .nbi-row:hover { background: color-mix(in srgb, var(--nbi-accent) 8%, var(--nbi-bg)); }
.nbi-body > .nbi-row.nbi-heat { background: color-mix(in srgb, var(--nbi-warn) var(--nbi-heat), var(--nbi-bg)); }
.nbi-body > .nbi-row.nbi-selected { background: color-mix(in srgb, var(--nbi-accent) 30%, var(--nbi-bg)); }
.nbi-cell { padding: 0 6px; overflow: hidden; white-space: nowrap; text-overflow: ellipsis; position: relative; }
/* the name column stays in view while the table scrolls sideways (opaque: rows pass below it) */
.nbi-cell.nbi-col-name { position: sticky; left: 0; z-index: 1; background: inherit; display: flex; align-items: center;
  gap: 4px; border-right: 1px solid var(--nbi-border); }
.nbi-resize { position: absolute; top: 0; right: 0; width: 6px; height: 100%; cursor: col-resize; z-index: 2; }
.nbi-resize:hover { background: var(--nbi-accent); opacity: .4; }
.nbi-mid { display: flex; min-width: 0; overflow: hidden; }
.nbi-mid-head { overflow: hidden; text-overflow: ellipsis; white-space: nowrap; flex: 0 1 auto; min-width: 1ch; }
.nbi-mid-tail { flex: 0 0 auto; white-space: nowrap; }
.nbi-caret { flex: none; }
/* a badge or tag gives way long before the name does (shrink 100 to 1), down to its ⚠ */
.nbi-tag, .nbi-problem { flex: 0 100 auto; min-width: 2.2em; overflow: hidden; text-overflow: ellipsis; white-space: nowrap; }
.nbi-col-name > .nbi-key { flex: 0 1 auto; min-width: min(6ch, 100%); }
.nbi-problem { padding: 0 5px; border-radius: 8px; font-size: .8em; line-height: 16px; font-weight: 600;
  color: ${JP.error1}; background: color-mix(in srgb, ${JP.error1} 14%, transparent); }
.nbi-problems { order: 10; flex-basis: 100%; padding: 3px 8px; border-radius: 4px; font-weight: 600;
  color: ${JP.error1}; background: color-mix(in srgb, ${JP.error1} 12%, transparent); }
.nbi-legend { display: inline-flex; align-items: center; gap: 6px; margin: 0 0 6px; font-size: .85em; color: var(--nbi-fg-dim); }
.nbi-legend-label { font-weight: 600; }
.nbi-legend-bar { width: 120px; height: 10px; border-radius: 2px; border: 1px solid var(--nbi-border);
  background: linear-gradient(to right, color-mix(in srgb, var(--nbi-warn) 4%, var(--nbi-bg)), color-mix(in srgb, var(--nbi-warn) 45%, var(--nbi-bg))); }
.nbi-legend-end { font-variant-numeric: tabular-nums; }
.nbi-only { display: inline-flex; align-items: center; gap: 4px; }
.nbi-components { margin: 0 0 6px; }
.nbi-components > summary { cursor: pointer; font-weight: 600; color: var(--nbi-fg-dim); }
.nbi-components-table { border-collapse: collapse; font-size: .92em; margin-top: 4px; }
.nbi-components-table th, .nbi-components-table td { padding: 1px 10px 1px 0; border-bottom: 1px solid var(--nbi-border);
  text-align: left; }
.nbi-components-table .nbi-num { text-align: right; }
.nbi-chart-caption { font-size: .85em; color: var(--nbi-fg-dim); margin: 4px 0 0; }
.nbi-num { text-align: right; font-variant-numeric: tabular-nums; }
.nbi-sort { all: unset; cursor: pointer; font-weight: 600; display: block; width: 100%; overflow: hidden; text-overflow: ellipsis; }
.nbi-arrow { color: var(--nbi-accent); font-size: .8em; }
.nbi-caret { display: inline-block; width: 14px; text-align: center; cursor: pointer; color: var(--nbi-fg-dim); user-select: none; }
.nbi-key { overflow: hidden; text-overflow: ellipsis; font-family: var(--jp-code-font-family, ui-monospace, SFMono-Regular, Menlo, monospace); font-size: .95em; }
.nbi-kind-tensor .nbi-key { color: var(--nbi-fg-dim); font-style: italic; }
.nbi-kind-group .nbi-key { font-weight: 600; color: var(--nbi-accent); }
.nbi-tag { margin-left: 6px; color: var(--nbi-fg-dim); font-size: .85em; }
.nbi-pct { display: inline-block; min-width: 3.6em; margin-left: 4px; color: var(--nbi-fg-dim); font-size: .85em; }
.nbi-badge { display: inline-block; padding: 0 6px; border-radius: 8px; font-size: .82em; line-height: 16px; }
.nbi-trainable { color: #43a047; font-weight: 600; }
.nbi-frozen { background: color-mix(in srgb, #1565c0 20%, transparent); }
.nbi-partial { background: color-mix(in srgb, var(--nbi-warn) 25%, transparent); }
.nbi-spark { display: block; fill: var(--nbi-accent); opacity: .85; }
.nbi-detail { flex: 0 0 ${DETAIL}px; max-height: 760px; overflow: auto; padding: 6px 10px; border: 1px solid var(--nbi-border);
  border-radius: 4px; background: var(--nbi-bg-alt); }
.nbi-detail-title { margin: 2px 0 6px; font-size: 1.05em; font-family: var(--jp-code-font-family, ui-monospace, monospace);
  word-break: break-all; }
.nbi-copies { display: flex; flex-wrap: wrap; gap: 4px; margin: 0 0 6px; grid-column: 1 / -1; }
.nbi-copy { font-size: .85em; min-height: 22px; padding: 1px 6px; }
.nbi-hint { color: var(--nbi-fg-dim); }
.nbi-detail table { border-collapse: collapse; width: 100%; margin: 0 0 8px; font-size: .92em; }
.nbi-detail caption { text-align: left; font-weight: 600; padding: 4px 0 2px; color: var(--nbi-fg-dim); }
.nbi-detail th, .nbi-detail td { text-align: left; padding: 1px 6px 1px 0; vertical-align: top; border-bottom: 1px solid var(--nbi-border); }
.nbi-kv th { font-weight: 500; color: var(--nbi-fg-dim); width: 40%; }
.nbi-chart { display: block; }
.nbi-chart .nbi-bars { fill: var(--nbi-accent); }
.nbi-chart .nbi-axis line { stroke: var(--nbi-fg-dim); }
.nbi-chart .nbi-axis text { fill: var(--nbi-fg-dim); font-size: 10px; }
.nbi-log { display: inline-flex; align-items: center; gap: 2px; font-size: .9em; }
.nbi-status { margin-top: 4px; color: var(--nbi-fg-dim); font-size: .85em; }
@container (max-width: ${DETAIL_BESIDE_FROM}px) {
  .nbi-main { flex-direction: column; align-items: stretch; }
  .nbi-grid { flex: none; width: 100%; }
  .nbi-detail { flex: none; width: 100%; max-height: none; display: grid; grid-template-columns: repeat(auto-fit, minmax(300px, 1fr));
    gap: 0 16px; align-items: start; }
  .nbi-detail-title { grid-column: 1 / -1; }
}
`;
