// The studio page: one HTML document with its style and script inline, so that
// the browser fetches nothing but this page and its stream from the coordinator
// (the Content-Security-Policy sent with it allows nothing else). The script
// is in page.script.ts; the markup's ids and data-* attributes are what it fills
// in and what the browser test reads.
import { createHash } from 'node:crypto';
import { bytesText } from './findings.js';
import { studioMain } from './page.script.js';

const STYLE = `
:root { --bg: #f5f7fa; --card: #fff; --ink: #0f172a; --muted: #64748b; --line: #e2e8f0; --accent: #2563eb; --bad: #b91c1c; --good: #15803d; --warn: #b45309; }
* { box-sizing: border-box; }
body { margin: 0; font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: var(--ink); background: var(--bg); }
header { display: flex; align-items: center; gap: 16px; padding: 10px 20px; background: #0f172a; color: #e2e8f0; }
header h1 { font-size: 16px; margin: 0; font-weight: 600; letter-spacing: .02em; }
header .facts { color: #94a3b8; font-size: 13px; }
#live { margin-left: auto; font-size: 12px; padding: 2px 10px; border-radius: 999px; background: #334155; }
#live[data-state="live"] { background: #166534; color: #dcfce7; }
#live[data-state="unauthorized"], #live[data-state="error"] { background: #991b1b; color: #fee2e2; }
#banner { display: none; margin: 12px 20px 0; padding: 10px 14px; border-radius: 8px; background: #fef2f2; color: #7f1d1d; border: 1px solid #fecaca; }
#banner[data-shown="true"] { display: block; }
.layout { display: grid; grid-template-columns: 290px minmax(0, 1fr); gap: 16px; padding: 16px 20px; align-items: start; }
.card { background: var(--card); border: 1px solid var(--line); border-radius: 10px; padding: 12px 14px; margin-bottom: 16px; }
.card h2 { font-size: 13px; text-transform: uppercase; letter-spacing: .06em; color: var(--muted); margin: 0 0 8px; font-weight: 600; }
.node { display: grid; grid-template-columns: 10px 1fr auto; gap: 2px 8px; align-items: center; padding: 6px 0; border-top: 1px solid var(--line); }
.node:first-of-type { border-top: 0; }
.dot { width: 10px; height: 10px; border-radius: 50%; background: var(--bad); }
.node[data-up="true"] .dot { background: var(--good); }
.node .url { font-family: ui-monospace, monospace; font-size: 12px; overflow: hidden; text-overflow: ellipsis; white-space: nowrap; }
.node .sub { grid-column: 2 / 4; color: var(--muted); font-size: 12px; }
.badge { font-size: 11px; padding: 1px 7px; border-radius: 999px; background: #e2e8f0; color: #334155; }
.badge.bad { background: #fee2e2; color: var(--bad); }
.badge.warn { background: #fef3c7; color: var(--warn); }
.move { font-size: 12px; padding: 4px 0; }
.bar { height: 6px; border-radius: 3px; background: #e2e8f0; overflow: hidden; margin-top: 3px; }
.bar > i { display: block; height: 100%; background: var(--accent); }
#tableFilter { width: 100%; padding: 6px 8px; border: 1px solid var(--line); border-radius: 6px; margin-bottom: 6px; font: inherit; }
#tableList { max-height: 460px; overflow: auto; }
#tableList button { display: grid; grid-template-columns: 1fr auto; width: 100%; text-align: left; background: none; border: 0; border-radius: 6px; padding: 5px 8px; font: inherit; cursor: pointer; color: inherit; }
#tableList button:hover { background: #f1f5f9; }
#tableList button[aria-current="true"] { background: #dbeafe; }
#tableList .rate { color: var(--muted); font-size: 12px; font-variant-numeric: tabular-nums; }
#tableList .warnmark { color: var(--bad); font-weight: 700; margin-right: 4px; }
.muted { color: var(--muted); }
.tablehead { display: flex; align-items: baseline; gap: 12px; flex-wrap: wrap; }
.tablehead h2 { font-size: 20px; text-transform: none; letter-spacing: 0; color: var(--ink); margin: 0; }
.figures { display: flex; gap: 22px; flex-wrap: wrap; margin-top: 10px; }
.figure b { display: block; font-size: 18px; font-variant-numeric: tabular-nums; }
.figure span { color: var(--muted); font-size: 12px; }
.figure[data-skewed="true"] b { color: var(--bad); }
.toolbar { display: flex; align-items: center; gap: 6px; margin-bottom: 8px; }
.toolbar button { font: inherit; font-size: 12px; padding: 3px 10px; border: 1px solid var(--line); background: #fff; border-radius: 6px; cursor: pointer; }
.toolbar button[aria-pressed="true"] { background: var(--ink); color: #fff; border-color: var(--ink); }
.toolbar .legend { margin-left: auto; display: flex; align-items: center; gap: 6px; font-size: 12px; color: var(--muted); }
#legendBar { width: 140px; height: 10px; border-radius: 3px; }
.heat { display: grid; grid-template-columns: 64px minmax(0, 1fr); }
#rowLabels { position: relative; height: 340px; font-size: 11px; color: var(--muted); font-family: ui-monospace, monospace; }
#rowLabels span { position: absolute; right: 6px; transform: translateY(-50%); white-space: nowrap; }
#heatWrap { position: relative; height: 340px; background: #f8fafc; border: 1px solid var(--line); border-radius: 4px; }
#heatCanvas { width: 100%; height: 100%; display: block; }
#hotMarker { position: absolute; left: 0; right: 0; border: 2px solid #111827; border-radius: 2px; pointer-events: none; display: none; }
#hotMarker[data-hot-slice] { display: block; }
#hotMarker span { position: absolute; left: 4px; top: -22px; background: #111827; color: #fff; font-size: 11px; padding: 1px 6px; border-radius: 4px; white-space: nowrap; }
#heatEmpty { position: absolute; inset: 0; display: flex; align-items: center; justify-content: center; color: var(--muted); }
#tip { position: absolute; pointer-events: none; background: #111827; color: #fff; font-size: 12px; padding: 3px 8px; border-radius: 4px; display: none; white-space: nowrap; z-index: 2; }
.axis { display: flex; justify-content: space-between; margin-left: 64px; font-size: 11px; color: var(--muted); padding-top: 3px; }
.columns { display: grid; grid-template-columns: minmax(0, 3fr) minmax(0, 2fr); gap: 16px; }
#findings { list-style: none; margin: 0; padding: 0; }
.finding { border-left: 4px solid var(--bad); background: #fff7f7; padding: 10px 12px; border-radius: 0 8px 8px 0; margin-bottom: 10px; }
.finding h3 { margin: 0 0 4px; font-size: 15px; }
.finding .pattern { font-family: ui-monospace, monospace; font-size: 11px; color: var(--bad); margin-left: 6px; font-weight: 400; }
.finding p { margin: 4px 0; }
.finding ul { margin: 4px 0 0; padding-left: 18px; }
.finding li { margin: 2px 0; }
.nofinding { color: var(--good); }
table.list { width: 100%; border-collapse: collapse; font-size: 13px; }
table.list th { text-align: left; font-weight: 500; color: var(--muted); font-size: 12px; border-bottom: 1px solid var(--line); padding: 3px 4px; }
table.list td { padding: 3px 4px; border-bottom: 1px solid #f1f5f9; font-variant-numeric: tabular-nums; }
table.list td.key { font-family: ui-monospace, monospace; max-width: 200px; overflow: hidden; text-overflow: ellipsis; white-space: nowrap; }
table.list td.num { text-align: right; }
table.list .bar { width: 80px; margin: 0; }
code { font-family: ui-monospace, monospace; font-size: 12px; background: #f1f5f9; padding: 0 3px; border-radius: 3px; }
`;

const BODY = `
<header>
  <h1>keyslice studio</h1>
  <span class="facts" id="clusterFacts">connecting…</span>
  <span id="live" data-state="connecting">connecting</span>
</header>
<div id="banner" role="alert"></div>
<div class="layout">
  <aside>
    <div class="card" id="clusterCard"><h2>Nodes</h2><div id="nodes" class="muted">waiting for the first sample…</div></div>
    <div class="card"><h2>Slice moves</h2><div id="moves" class="muted">none</div></div>
    <div class="card"><h2>Tables</h2><input id="tableFilter" type="search" placeholder="filter tables" aria-label="filter tables"><div id="tableList"></div></div>
  </aside>
  <main>
    <div class="card" id="tableCard">
      <div class="tablehead"><h2 id="tableName">no table yet</h2><span id="tableKeys" class="muted"></span></div>
      <div class="figures" id="figures"></div>
    </div>
    <div class="card">
      <h2>Load per slice over time</h2>
      <div class="toolbar" id="metricBar" role="group" aria-label="colour by">
        <button data-metric="ops" aria-pressed="true">reads + writes /s</button>
        <button data-metric="reads" aria-pressed="false">reads /s</button>
        <button data-metric="writes" aria-pressed="false">writes /s</button>
        <button data-metric="bytes" aria-pressed="false">bytes</button>
        <span class="legend"><span>0</span><canvas id="legendBar" width="140" height="10"></canvas><span id="legendMax">0</span></span>
      </div>
      <div class="heat">
        <div id="rowLabels"></div>
        <div id="heatWrap" data-testid="heatmap"><canvas id="heatCanvas"></canvas><div id="hotMarker"><span></span></div><div id="heatEmpty">no load yet</div><div id="tip"></div></div>
      </div>
      <div class="axis" id="timeAxis"></div>
    </div>
    <div class="columns">
      <div class="card"><h2>Findings</h2><ol id="findings"></ol></div>
      <div>
        <div class="card"><h2>Hottest sharding keys</h2><div id="hotKeys" class="muted">none</div></div>
        <div class="card"><h2>Partition sizes (largest slices)</h2><div id="partitions" class="muted">none</div></div>
      </div>
    </div>
  </main>
</div>`;

// bytesText is self-contained (no reference outside itself), so its text runs in the page as it does here.
const SCRIPT = `(${studioMain.toString()})(${bytesText.toString()});`;
const sha256 = (text: string) => `'sha256-${createHash('sha256').update(text, 'utf8').digest('base64')}'`;

function document(title: string, style: string, body: string, script: string | null): { html: string; csp: string } {
  const scriptPolicy = script === null ? "script-src 'none'" : `script-src ${sha256(script)}`;
  return {
    html: `<!doctype html>\n<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><link rel="icon" href="data:,"><title>${title}</title><style>${style}</style></head><body>${body}${script === null ? '' : `<script>${script}</script>`}</body></html>\n`,
    // connect-src 'self': the stream; nothing else is loaded from anywhere.
    csp: `default-src 'none'; ${scriptPolicy}; style-src ${sha256(style)}; connect-src 'self'; img-src 'self' data:; form-action 'self'; base-uri 'none'; frame-ancestors 'none'`,
  };
}

let page: { html: string; csp: string } | undefined;

export function studioPage(): { html: string; csp: string } {
  return (page ??= document('keyslice studio', STYLE, BODY, SCRIPT));
}

const TOKEN_STYLE = `body { font: 15px/1.5 system-ui, sans-serif; max-width: 560px; margin: 80px auto; padding: 0 20px; color: #0f172a; }
h1 { font-size: 20px; } input { font: inherit; padding: 6px 8px; width: 280px; } button { font: inherit; padding: 6px 14px; } code { background: #f1f5f9; padding: 0 4px; }`;

/** The answer to a page load without the client token (or with a wrong one): says so, and asks for it. */
export function tokenPage(wrongGiven: boolean): { html: string; csp: string } {
  const said = wrongGiven ? 'The client token given is wrong.' : 'This cluster needs a client token, and none was given.';
  const body = `<h1>keyslice studio: client token needed</h1>
<p id="tokenMessage" data-reason="${wrongGiven ? 'wrong' : 'missing'}">${said} Open the studio as <code>/studio?token=&lt;token&gt;</code>, with the token the coordinator was started with (<code>--token</code> or <code>KEYSLICE_TOKEN</code>), or give it here:</p>
<form method="get" action="/studio"><input name="token" type="password" autocomplete="off" aria-label="client token" autofocus> <button type="submit">Open the studio</button></form>`;
  return document('keyslice studio: client token needed', TOKEN_STYLE, body, null);
}
