// @ts-nocheck -- browser code: the coordinator's tsconfig has no DOM types. It is
// sent as text (studioMain.toString(), inline in page.ts), so it must not use
// anything from outside the function but what page.ts passes in as text too
// (findings.ts bytesText, so that the page and the findings write sizes alike).
// The browser test (test/studio.test.ts) runs it.

/** The studio's script: reads /studio/stream (Server-Sent Events) and draws the
 * cluster, the table list, the heat map, hot keys, partition sizes and findings.
 * `bytes`: findings.ts bytesText. */
export function studioMain(bytes) {
  const $ = (id) => document.getElementById(id);
  const token = new URLSearchParams(location.search).get('token');
  const HOT_ROWS_LABELLED = 24;
  const PALETTE = [
    [254, 243, 199],
    [252, 211, 77],
    [245, 158, 11],
    [234, 88, 12],
    [185, 28, 28],
    [127, 29, 29],
  ];
  const st = {
    table: tableFromHash(),
    metric: 'ops',
    /** Heat-map columns: {at, cells: [slice, reads/s, writes/s, bytes, ...]}, oldest first. */
    columns: [],
    historySeconds: 300,
    sampleMs: 1000,
    summary: null,
    detail: null,
    es: null,
    lastSampleAt: 0,
    filter: '',
    /** Where the heat map drew each slice, for the tooltip and the marker. */
    rows: null,
  };

  function tableFromHash() {
    const m = /table=([^&]*)/.exec(location.hash);
    return m ? decodeURIComponent(m[1]) : '';
  }

  const esc = (s) => String(s).replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]);
  const num = (n) => {
    if (n === null || n === undefined) return '–';
    const a = Math.abs(n);
    if (a >= 1e9) return (n / 1e9).toFixed(1) + 'G';
    if (a >= 1e6) return (n / 1e6).toFixed(1) + 'M';
    if (a >= 1e4) return (n / 1e3).toFixed(1) + 'k';
    if (a >= 100 || Number.isInteger(n)) return String(Math.round(n));
    return n.toFixed(1);
  };
  const shortNode = (url) => String(url).replace(/^wss?:\/\//, '');
  /** Bars get their width through the CSSOM: the page's policy forbids style attributes in markup. */
  const sizeBars = (root) => root.querySelectorAll('[data-w]').forEach((e) => (e.style.width = Math.max(0, Math.min(100, Number(e.dataset.w))) + '%'));
  const keysText = (k) => (Array.isArray(k) ? k : k ? [k] : []).map((c) => c.name + ' (' + c.type + ')').join(', ');

  function setLive(state, text) {
    const el = $('live');
    el.dataset.state = state;
    el.textContent = text;
  }

  function banner(text) {
    const el = $('banner');
    el.textContent = text || '';
    el.dataset.shown = text ? 'true' : 'false';
  }

  // ---- the stream ------------------------------------------------------------

  function streamUrl() {
    const q = new URLSearchParams();
    if (st.table) q.set('table', st.table);
    if (token !== null) q.set('token', token);
    return '/studio/stream?' + q.toString();
  }

  function connect() {
    if (st.es) st.es.close();
    st.columns = [];
    st.detail = null;
    const es = new EventSource(streamUrl());
    st.es = es;
    setLive('connecting', 'connecting');
    es.addEventListener('hello', (ev) => {
      const h = JSON.parse(ev.data);
      st.historySeconds = h.historySeconds;
      st.sampleMs = h.sampleMs;
      st.columns = h.history.map(([at, cells]) => ({ at, cells }));
      if (h.table && !st.table) st.table = h.table;
    });
    es.addEventListener('sample', (ev) => {
      const { summary, detail } = JSON.parse(ev.data);
      st.summary = summary;
      st.lastSampleAt = performance.now(); // an age only (the 'no sample for N s' check): the monotonic clock
      banner('');
      setLive('live', 'live');
      if (detail) {
        if (!st.table) st.table = detail.name;
        if (detail.name === st.table) {
          st.detail = detail;
          const cells = [];
          for (const s of detail.slices) cells.push(s[0], s[4], s[5], s[3]);
          st.columns.push({ at: summary.at, cells });
          const oldest = summary.at - st.historySeconds * 1000;
          while (st.columns.length > 0 && st.columns[0].at < oldest) st.columns.shift();
        }
      } else st.detail = null;
      render();
    });
    es.onerror = () => {
      if (es !== st.es) return;
      if (es.readyState === EventSource.CLOSED) {
        // The browser gave up (an HTTP error): ask once more to learn why, and say it plainly.
        fetch(streamUrl(), { signal: AbortSignal.timeout(5000) })
          .then(async (res) => {
            if (res.ok) {
              res.body && res.body.cancel();
              return '';
            }
            const body = await res.json().catch(() => ({}));
            const msg = body.error ? body.error.message : 'HTTP ' + res.status;
            if (res.status === 401) {
              setLive('unauthorized', 'client token needed');
              banner('The live stream was refused: ' + msg + '. Reload the page with ?token=<token>.');
              return 'stop';
            }
            return msg;
          })
          .catch((err) => String(err))
          .then((why) => {
            if (why === 'stop') return;
            setLive('error', 'disconnected');
            if (why) banner('The live stream failed: ' + why + '. Retrying in 5 seconds.');
            setTimeout(() => es === st.es && connect(), 5000);
          });
      } else setLive('connecting', 'reconnecting');
    };
  }

  function select(name) {
    if (name === st.table) return;
    st.table = name;
    history.replaceState(null, '', location.pathname + location.search + '#table=' + encodeURIComponent(name));
    connect();
    render();
  }

  // ---- rendering -------------------------------------------------------------

  function render() {
    renderCluster();
    renderTables();
    renderTable();
    drawHeat();
  }

  function renderCluster() {
    const s = st.summary;
    if (!s) return;
    const c = s.cluster;
    const up = c.nodes.filter((n) => n.up).length;
    $('clusterFacts').textContent =
      c.nodes.length + ' nodes (' + up + ' up) · ' + c.sliceCount + ' slices · epoch ' + c.epoch + ' · ' + s.tables.length + ' tables' + (c.unassignedSlices > 0 ? ' · ' + c.unassignedSlices + ' slices without a node' : '') +
      ' · sample ' + s.seq + ' took ' + s.tookMs + ' ms';
    const nodes = $('nodes');
    nodes.classList.toggle('muted', c.nodes.length === 0);
    nodes.innerHTML =
      c.nodes.length === 0
        ? 'no slice node has joined'
        : c.nodes
            .map(
              (n) =>
                '<div class="node" data-node="' + esc(n.node) + '" data-up="' + n.up + '"><span class="dot" title="' + (n.up ? 'up' : n.silentMs !== null ? 'silent' : 'down') + '"></span><span class="url">' + esc(shortNode(n.node)) + '</span>' +
                '<span>' + (n.up ? '' : n.silentMs !== null ? '<span class="badge bad">silent ' + (n.silentMs / 1000).toFixed(1) + ' s</span> ' : '<span class="badge bad">down</span> ') + (n.status !== 'active' ? '<span class="badge warn">' + esc(n.status) + '</span> ' : '') + '<span class="badge">' + n.slices + ' slices</span></span>' +
                '<span class="sub">' + num(n.items) + ' items · ' + bytes(n.bytes) + ' · ' + num(n.readsPerSecond) + ' r/s · ' + num(n.writesPerSecond) + ' w/s · ' + n.workers + (n.workers === 1 ? ' worker' : ' workers') + '</span></div>',
            )
            .join('');
    const m = c.moves;
    const moves = $('moves');
    const facts = m.completed + ' done · ' + m.failed + ' rolled back · ' + m.pending + ' pending';
    moves.classList.toggle('muted', m.inFlight.length === 0);
    moves.innerHTML =
      m.inFlight
        .map((mv) => {
          const pct = mv.items > 0 ? Math.min(100, (100 * mv.copied) / mv.items) : mv.phase === 'copy' ? 0 : 100;
          return '<div class="move" data-slice="' + mv.slice + '">slice ' + mv.slice + ': ' + esc(shortNode(mv.from)) + ' → ' + esc(shortNode(mv.to)) + ' · ' + esc(mv.phase) + ' · ' + num(mv.copied) + ' of ' + num(mv.items) + ' items<div class="bar"><i data-w="' + pct + '"></i></div></div>';
        })
        .join('') +
      '<div class="move muted">' + (m.inFlight.length === 0 ? 'none in flight · ' : '') + facts + '</div>' +
      (m.lastError ? '<div class="move"><span class="badge bad">last error</span> ' + esc(m.lastError) + '</div>' : '');
    sizeBars(moves);
  }

  function renderTables() {
    const s = st.summary;
    if (!s) return;
    const f = st.filter.toLowerCase();
    const rows = s.tables
      .filter((t) => t.name.toLowerCase().includes(f))
      .sort((a, b) => b.findings.length - a.findings.length || b.readsPerSecond + b.writesPerSecond - (a.readsPerSecond + a.writesPerSecond) || (a.name < b.name ? -1 : 1));
    const list = $('tableList');
    list.innerHTML =
      (rows.length === 0 ? '<div class="muted">' + (s.tables.length === 0 ? 'no table yet' : 'no table matches') + '</div>' : '') +
      rows
        .map(
          (t) =>
            '<button data-table="' + esc(t.name) + '" data-findings="' + esc(t.findings.join(' ')) + '" aria-current="' + (t.name === st.table) + '" title="' + esc(t.findings.join(', ') || 'no finding') + '"><span>' +
            (t.findings.length > 0 ? '<span class="warnmark">!</span>' : '') + esc(t.name) + '</span><span class="rate">' + num(t.readsPerSecond + t.writesPerSecond) + ' ops/s · ' + num(t.items) + '</span></button>',
        )
        .join('');
  }

  function renderTable() {
    const s = st.summary;
    const d = st.detail;
    const t = s && s.tables.find((x) => x.name === st.table);
    $('tableName').textContent = st.table || 'no table yet';
    if (!t) {
      $('tableKeys').textContent = s && st.table ? 'this table does not exist (any more)' : '';
      $('figures').innerHTML = '';
      $('findings').innerHTML = '';
      return;
    }
    $('tableKeys').textContent =
      'sharding key ' + keysText(t.shardingKey) + (t.sortingKey ? ' · sorting key ' + keysText(t.sortingKey) : '') + (t.evenDistribution ? ' · even distribution over ' + t.evenDistribution.buckets + ' buckets' : '');
    const mm = t.maxOverMean || { items: 0, reads: 0, writes: 0 };
    const sliceCount = d ? d.sliceCount : s.cluster.sliceCount;
    const fig = (label, value, skewed, title) => '<div class="figure" data-skewed="' + !!skewed + '"' + (title ? ' title="' + esc(title) + '"' : '') + '><b>' + value + '</b><span>' + label + '</span></div>';
    const skew = (v) => v >= 4 && sliceCount >= 8;
    const mmTitle = 'the busiest slice over the mean of all ' + sliceCount + ' slices: 1 is perfectly even, ' + sliceCount + ' means everything on one slice';
    $('figures').innerHTML =
      fig('items', num(t.items)) +
      fig('bytes', bytes(t.bytes)) +
      fig('reads/s', num(t.readsPerSecond)) +
      fig('writes/s', num(t.writesPerSecond)) +
      fig('slices with items', num(t.slicesWithItems) + ' / ' + sliceCount) +
      '<div class="figure" id="maxOverMean" data-reads="' + mm.reads + '" data-writes="' + mm.writes + '" data-items="' + mm.items + '" title="' + esc(mmTitle) + '"><b>' + num(mm.reads) + ' · ' + num(mm.writes) + ' · ' + num(mm.items) + '</b><span>max/mean reads · writes · items</span></div>' +
      (t.error ? fig('load', '<span class="badge bad">' + esc(t.error) + '</span>') : t.partial ? fig('load', '<span class="badge warn">partial: a node is down</span>') : '');
    if (skew(Math.max(mm.reads, mm.writes))) $('maxOverMean').dataset.skewed = 'true';
    renderFindings(d, t);
    renderHotKeys(d, t);
    renderPartitions(d, s);
  }

  function renderFindings(d, t) {
    const el = $('findings');
    if (!d) {
      el.innerHTML = '<li class="muted">waiting for this table\'s load…</li>';
      return;
    }
    if (d.findings.length === 0) {
      const quiet = t.readsPerSecond + t.writesPerSecond < 5;
      el.innerHTML = '<li class="nofinding">' + (quiet ? 'Nothing to judge yet: this table had under 5 reads and writes per second, and its items are not piled up.' : 'No anti-pattern seen: the load is spread over the slices.') + '</li>';
      return;
    }
    el.innerHTML = d.findings
      .map(
        (f) =>
          '<li class="finding" data-pattern="' + esc(f.pattern) + '"' + (f.key !== undefined ? ' data-key="' + esc(f.key) + '"' : '') + (f.slice !== undefined ? ' data-slice="' + f.slice + '"' : '') + '>' +
          '<h3>' + esc(f.title) + '<span class="pattern">' + esc(f.pattern) + '</span></h3>' +
          '<p class="seen">' + esc(f.seen) + '</p><p class="muted">' + esc(f.why) + '</p><p><b>Fix:</b> ' + esc(f.fix) + '</p>' +
          '<ul>' + f.steps.map((x) => '<li>' + esc(x) + '</li>').join('') + '</ul></li>',
      )
      .join('');
  }

  function renderHotKeys(d) {
    const el = $('hotKeys');
    if (!d || d.hotKeys.length === 0) {
      el.className = 'muted';
      el.textContent = 'no key with load in the last ' + (d ? d.windowSeconds : 10) + ' seconds';
      return;
    }
    el.className = '';
    const total = d.slices.reduce((a, s) => a + s[4] + s[5], 0) || 1;
    el.innerHTML =
      '<table class="list"><tr><th>sharding key</th><th>slice</th><th class="num">ops/s</th><th>share</th></tr>' +
      d.hotKeys
        .map((k) => '<tr data-key="' + esc(k.key) + '" data-slice="' + k.slice + '"><td class="key" title="' + esc(k.key) + '">' + esc(k.key) + '</td><td>' + k.slice + '</td><td class="num">' + num(k.opsPerSecond) + '</td><td><div class="bar"><i data-w="' + (100 * k.opsPerSecond) / total + '"></i></div></td></tr>')
        .join('') +
      '</table>';
    sizeBars(el);
  }

  function renderPartitions(d, s) {
    const el = $('partitions');
    const withItems = d ? d.slices.filter((x) => x[2] > 0) : [];
    if (withItems.length === 0) {
      el.className = 'muted';
      el.textContent = 'no items';
      return;
    }
    el.className = '';
    const sorted = withItems.slice().sort((a, b) => b[3] - a[3]);
    const median = sorted[sorted.length >> 1][3];
    const max = sorted[0][3] || 1;
    el.innerHTML =
      '<div class="muted">' + withItems.length + ' slices hold items · largest ' + bytes(sorted[0][3]) + ' · median ' + bytes(median) + '</div>' +
      '<table class="list"><tr><th>slice</th><th>node</th><th class="num">items</th><th class="num">bytes</th><th></th></tr>' +
      sorted
        .slice(0, 8)
        .map((x) => {
          const node = s.cluster.nodes[x[1]];
          return '<tr data-slice="' + x[0] + '"><td>' + x[0] + '</td><td class="key">' + esc(node ? shortNode(node.node) : '?') + '</td><td class="num">' + num(x[2]) + '</td><td class="num">' + bytes(x[3]) + '</td><td><div class="bar"><i data-w="' + (100 * x[3]) / max + '"></i></div></td></tr>';
        })
        .join('') +
      '</table>';
    sizeBars(el);
  }

  // ---- the heat map: time across, slices down, colour = the chosen figure -------

  function value(cells, i) {
    switch (st.metric) {
      case 'reads':
        return cells[i + 1];
      case 'writes':
        return cells[i + 2];
      case 'bytes':
        return cells[i + 3];
      default:
        return cells[i + 1] + cells[i + 2];
    }
  }

  function colour(t) {
    const x = Math.max(0, Math.min(1, t)) * (PALETTE.length - 1);
    const i = Math.min(PALETTE.length - 2, Math.floor(x));
    const f = x - i;
    const a = PALETTE[i];
    const b = PALETTE[i + 1];
    return 'rgb(' + Math.round(a[0] + (b[0] - a[0]) * f) + ',' + Math.round(a[1] + (b[1] - a[1]) * f) + ',' + Math.round(a[2] + (b[2] - a[2]) * f) + ')';
  }

  function drawLegend(max) {
    const c = $('legendBar');
    const g = c.getContext('2d');
    for (let x = 0; x < c.width; x++) {
      g.fillStyle = colour(x / (c.width - 1));
      g.fillRect(x, 0, 1, c.height);
    }
    $('legendMax').textContent = st.metric === 'bytes' ? bytes(max) : num(max) + ' /s';
  }

  function drawHeat() {
    const wrap = $('heatWrap');
    const canvas = $('heatCanvas');
    const dpr = window.devicePixelRatio || 1;
    const W = wrap.clientWidth;
    const H = wrap.clientHeight;
    canvas.width = Math.max(1, Math.round(W * dpr));
    canvas.height = Math.max(1, Math.round(H * dpr));
    const g = canvas.getContext('2d');
    g.setTransform(dpr, 0, 0, dpr, 0, 0);
    g.clearRect(0, 0, W, H);
    // Rows: every slice with a non-zero figure in the window, in slice order.
    let max = 0;
    const seen = new Set();
    for (const col of st.columns) {
      for (let i = 0; i < col.cells.length; i += 4) {
        const v = value(col.cells, i);
        if (v > 0) {
          seen.add(col.cells[i]);
          if (v > max) max = v;
        }
      }
    }
    const slices = [...seen].sort((a, b) => a - b);
    const rowOf = new Map(slices.map((s, i) => [s, i]));
    // More slices than pixel rows: a band of several slices shows the largest of them.
    const perBand = Math.max(1, Math.ceil(slices.length / Math.max(1, Math.floor(H / 2))));
    const bands = Math.ceil(slices.length / perBand);
    const bandH = bands > 0 ? H / bands : H;
    const now = st.summary ? st.summary.at : Date.now();
    // The window grows with the history kept, from one minute up to historySeconds.
    const oldest = st.columns.length > 0 ? st.columns[0].at : now;
    const span = Math.min(st.historySeconds * 1000, Math.max(60_000, now - oldest + st.sampleMs));
    const colW = Math.max(1, (W * st.sampleMs) / span);
    const xOf = (at) => W - ((now - at) / span) * W - colW;
    const band = new Float64Array(bands);
    for (const col of st.columns) {
      band.fill(0);
      for (let i = 0; i < col.cells.length; i += 4) {
        const v = value(col.cells, i);
        if (v <= 0) continue;
        const b = Math.floor(rowOf.get(col.cells[i]) / perBand);
        if (v > band[b]) band[b] = v;
      }
      const x = xOf(col.at);
      for (let b = 0; b < bands; b++) {
        if (band[b] === 0) continue;
        g.fillStyle = colour(Math.sqrt(band[b] / max));
        g.fillRect(x, b * bandH, colW + 0.5, Math.max(1, bandH - (bandH > 4 ? 1 : 0)));
      }
    }
    st.rows = { slices, rowOf, perBand, bandH, xOf, colW };
    $('heatEmpty').style.display = slices.length === 0 ? 'flex' : 'none';
    $('heatEmpty').textContent = st.metric === 'bytes' ? 'no items in this table' : 'no ' + (st.metric === 'ops' ? 'reads or writes' : st.metric) + ' in the last ' + (span >= 120_000 ? Math.round(span / 60000) + ' minutes' : Math.round(span / 1000) + ' seconds');
    wrap.dataset.rows = String(slices.length);
    wrap.dataset.metric = st.metric;
    drawLegend(max);
    drawAxis(span);
    placeLabelsAndMarker(slices, rowOf, perBand, bandH);
  }

  function drawAxis(span) {
    const minutes = span / 60000;
    const parts = [];
    for (let i = 0; i <= 5; i++) {
      const ago = minutes - (i * minutes) / 5;
      parts.push('<span>' + (ago === 0 ? 'now' : '−' + (ago >= 1 ? ago.toFixed(ago % 1 ? 1 : 0) + ' min' : Math.round(ago * 60) + ' s')) + '</span>');
    }
    $('timeAxis').innerHTML = parts.join('');
  }

  /** The hot slice: the busiest one in the latest sample, outlined and named (with its hottest key). */
  function placeLabelsAndMarker(slices, rowOf, perBand, bandH) {
    const d = st.detail;
    const marker = $('hotMarker');
    const labels = $('rowLabels');
    let hot = null;
    if (d) for (const s of d.slices) if (s[4] + s[5] > 0 && (hot === null || s[4] + s[5] > hot[4] + hot[5])) hot = s;
    const y = (slice) => (Math.floor(rowOf.get(slice) / perBand) + 0.5) * bandH;
    const shown = new Set();
    if (slices.length <= HOT_ROWS_LABELLED) slices.forEach((s) => shown.add(s));
    else if (slices.length > 0) {
      shown.add(slices[0]);
      shown.add(slices[slices.length - 1]);
    }
    if (hot && rowOf.has(hot[0])) shown.add(hot[0]);
    labels.innerHTML = [...shown].map((s) => '<span data-slice="' + s + '">' + s + '</span>').join('');
    labels.querySelectorAll('span').forEach((e) => (e.style.top = y(Number(e.dataset.slice)) + 'px'));
    if (!hot || !rowOf.has(hot[0])) {
      delete marker.dataset.hotSlice;
      delete marker.dataset.hotKey;
      return;
    }
    const key = d.hotKeys.find((k) => k.slice === hot[0]);
    const h = Math.max(6, bandH);
    marker.style.top = y(hot[0]) - h / 2 - 2 + 'px';
    marker.style.height = h + 4 + 'px';
    marker.dataset.hotSlice = String(hot[0]);
    marker.dataset.ops = String(hot[4] + hot[5]);
    if (key) marker.dataset.hotKey = key.key;
    else delete marker.dataset.hotKey;
    marker.querySelector('span').textContent = 'hot slice ' + hot[0] + (key ? ' · key "' + key.key + '"' : '') + ' · ' + num(hot[4] + hot[5]) + ' ops/s';
  }

  function showTip(ev) {
    const tip = $('tip');
    const r = st.rows;
    if (!r || r.slices.length === 0) return (tip.style.display = 'none');
    const box = $('heatWrap').getBoundingClientRect();
    const x = ev.clientX - box.left;
    const y = ev.clientY - box.top;
    let col = null;
    for (const c of st.columns) if (x >= r.xOf(c.at) && x < r.xOf(c.at) + r.colW + 1) col = c;
    const b = Math.floor(y / r.bandH);
    const inBand = r.slices.slice(b * r.perBand, (b + 1) * r.perBand);
    if (!col || inBand.length === 0) return (tip.style.display = 'none');
    const parts = [];
    for (let i = 0; i < col.cells.length; i += 4) {
      if (!inBand.includes(col.cells[i])) continue;
      const v = value(col.cells, i);
      parts.push('slice ' + col.cells[i] + ': ' + (st.metric === 'bytes' ? bytes(v) : num(v) + ' ' + (st.metric === 'ops' ? 'ops' : st.metric) + '/s'));
    }
    tip.textContent = new Date(col.at).toLocaleTimeString() + ' · ' + (parts.length > 0 ? parts.slice(0, 3).join(' · ') : 'slice ' + inBand.join(', ') + ': 0');
    tip.style.display = 'block';
    tip.style.left = Math.min(x + 12, box.width - tip.offsetWidth - 4) + 'px';
    tip.style.top = y + 14 + 'px';
  }

  // ---- events ----------------------------------------------------------------

  $('metricBar').addEventListener('click', (ev) => {
    const b = ev.target.closest('button[data-metric]');
    if (!b) return;
    st.metric = b.dataset.metric;
    document.querySelectorAll('#metricBar button').forEach((x) => x.setAttribute('aria-pressed', String(x === b)));
    drawHeat();
  });
  $('tableList').addEventListener('click', (ev) => {
    const b = ev.target.closest('button[data-table]');
    if (b) select(b.dataset.table);
  });
  $('tableFilter').addEventListener('input', (ev) => {
    st.filter = ev.target.value;
    renderTables();
  });
  $('heatWrap').addEventListener('mousemove', showTip);
  $('heatWrap').addEventListener('mouseleave', () => ($('tip').style.display = 'none'));
  window.addEventListener('resize', drawHeat);
  window.addEventListener('hashchange', () => {
    const t = tableFromHash();
    if (t && t !== st.table) select(t);
  });
  // A stream that stays silent (a coordinator that stopped) shows as such, not as live.
  setInterval(() => {
    if (st.lastSampleAt > 0 && performance.now() - st.lastSampleAt > 5000 && $('live').dataset.state === 'live') setLive('connecting', 'no sample for ' + Math.round((performance.now() - st.lastSampleAt) / 1000) + ' s');
  }, 1000);
  connect();
}
