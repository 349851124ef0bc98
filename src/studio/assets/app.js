// mcpgraph studio: the browser page. It draws the selected tool of the graph from the layout the
// server computed (GET /api/graph), runs it (POST /api/runs), follows the run through the server's
// events (GET /api/events) and shows what every node saw (GET /api/runs/{run}/records/{index}).
// The HTTP/SSE contract is docs/studio.md. No framework and no build step: the file is served as is.
'use strict';

(() => {
  const SVG_NS = 'http://www.w3.org/2000/svg';
  const PSEUDO_TYPES = new Set(['item', 'branch']);
  const NODE_STATES = new Set(['pending', 'running', 'done', 'failed', 'paused']);
  const RUN_ACTIVE = new Set(['running', 'paused']);

  // The whole model of the page; the DOM is drawn from it.
  const model = {
    graph: null, // the last answer of GET /api/graph
    tool: null, // the selected tool's name
    breakpoints: new Map(), // tool name -> Set of node ids
    savedArgs: new Map(), // tool name -> the arguments last typed for it
    run: null, // {id, tool, state, pausedAt}
    nodes: new Map(), // node id -> {state, durationMs, count}
    records: new Map(), // record index -> RECORD
    result: null, // {state, result, error} from the `end` event
    lastDone: null, // the node that finished last (to mark the edge taken next)
    taken: new Set(), // "from\u0000to" of the edges this run went along
    highlight: null, // the node highlighted from the history
    expanded: null, // the record index whose detail row is open
    conn: 'connecting',
    warningsOpen: false, // the list of a checking graph's warnings is open
    reconnected: false, // the event stream broke: catch up on its next `hello`
    asking: null, // {run, question: {node, message, schema, timeoutMs}} while an ask node waits
  };

  // What is drawn now, to update it in place.
  const view = {
    nodes: new Map(), // node id -> {g, stats, type}
    edges: [], // {path, from, to, kind}
    size: null, // the drawing's [width, height] in its own units
    rows: new Map(), // record index -> tr.record
    maxRow: -1, // the largest record index in the table
    formTool: null, // the tool the input form was built for
    formSchema: null, // and its inputSchema, as JSON text
    fields: [], // the input form's fields: {name, kind, input, schema, required}
    extraArgs: {}, // raw JSON keys that have no field in the form
    askKey: null, // the question the ask form was built for (run and question as JSON text)
    askFields: [], // the ask form's fields, as `fields`
  };

  // ---------------------------------------------------------------- DOM helpers

  const $ = (selector, root = document) => root.querySelector(selector);

  function setAttrs(node, attrs) {
    for (const [key, value] of Object.entries(attrs || {})) {
      if (value === null || value === undefined || value === false) continue;
      node.setAttribute(key, value === true ? '' : String(value));
    }
    return node;
  }

  function appendAll(node, children) {
    for (const child of children) {
      if (child === null || child === undefined || child === false) continue;
      node.append(typeof child === 'string' || typeof child === 'number' ? String(child) : child);
    }
    return node;
  }

  function h(tag, attrs, ...children) {
    return appendAll(setAttrs(document.createElement(tag), attrs), children);
  }

  function s(tag, attrs, ...children) {
    return appendAll(setAttrs(document.createElementNS(SVG_NS, tag), attrs), children);
  }

  function toggleAttr(node, name, value) {
    if (value === null || value === undefined || value === false) node.removeAttribute(name);
    else node.setAttribute(name, String(value));
  }

  // ---------------------------------------------------------------- formatting

  function fmtMs(value) {
    if (typeof value !== 'number' || !Number.isFinite(value)) return '';
    if (value < 1) return value.toFixed(3);
    if (value < 100) return value.toFixed(2);
    return value.toFixed(0);
  }

  function pretty(value) {
    if (value === undefined) return '';
    try {
      return JSON.stringify(value, null, 2);
    } catch (_) {
      return String(value);
    }
  }

  function preview(value, max = 60) {
    if (value === undefined) return '';
    let text;
    try {
      text = JSON.stringify(value);
    } catch (_) {
      text = String(value);
    }
    if (text === undefined) return '';
    return text.length > max ? text.slice(0, max - 1) + '\u2026' : text;
  }

  function clip(text, maxChars) {
    if (maxChars < 2 || text.length <= maxChars) return text;
    return text.slice(0, maxChars - 1) + '\u2026';
  }

  function errorText(err) {
    return err && err.message ? err.message : String(err);
  }

  // ---------------------------------------------------------------- HTTP

  async function api(method, url, body) {
    const options = { method, headers: { Accept: 'application/json' } };
    if (body !== undefined) {
      options.headers['Content-Type'] = 'application/json';
      options.body = JSON.stringify(body);
    }
    const response = await fetch(url, options);
    const text = await response.text();
    let data = null;
    if (text) {
      try {
        data = JSON.parse(text);
      } catch (_) {
        data = text;
      }
    }
    if (!response.ok) {
      let detail = typeof data === 'string' ? data : '';
      if (data && typeof data === 'object') {
        const e = data.error !== undefined ? data.error : data.message;
        detail = e && typeof e === 'object' ? e.message || JSON.stringify(e) : String(e ?? JSON.stringify(data));
      }
      throw new Error(`${method} ${url}: ${response.status}${detail ? ' ' + detail : ''}`);
    }
    return data;
  }

  function showMessage(text) {
    const box = $('#message');
    box.textContent = text || '';
    box.hidden = !text;
  }

  // ---------------------------------------------------------------- the graph

  let graphLoading = false;
  let graphAgain = false;

  // Fetches /api/graph and redraws; calls made while one is in flight fold into one more fetch.
  async function loadGraph() {
    if (graphLoading) {
      graphAgain = true;
      return;
    }
    graphLoading = true;
    try {
      do {
        graphAgain = false;
        try {
          const graph = await api('GET', '/api/graph');
          if (!model.graph || typeof graph.version !== 'number' || graph.version >= (model.graph.version ?? -1)) {
            applyGraph(graph);
          }
        } catch (err) {
          showMessage(`could not load the graph: ${errorText(err)}`);
        }
      } while (graphAgain);
    } finally {
      graphLoading = false;
    }
  }

  function tools() {
    return (model.graph && Array.isArray(model.graph.tools)) ? model.graph.tools : [];
  }

  function currentTool() {
    return tools().find((t) => t.name === model.tool) || null;
  }

  function applyGraph(graph) {
    saveArgs();
    model.graph = graph;
    $('#file').textContent = graph.file || '';
    $('#file').title = graph.file ? `${graph.file} (version ${graph.version})` : '';
    document.title = graph.file ? `${graph.file} \u2014 mcpgraph studio` : 'mcpgraph studio';
    const list = tools();
    // A graph that does not check has no tools: keep the selection for when it checks again.
    if (graph.checks && !list.some((t) => t.name === model.tool)) {
      // A run in flight names its tool; otherwise the first one.
      const runTool = model.run && list.some((t) => t.name === model.run.tool) ? model.run.tool : null;
      model.tool = runTool || (list[0] ? list[0].name : null);
    }
    showMessage('');
    renderDiagnostics();
    renderTools();
    // The same inputs for the same tool: the form stays as it is (focus and half-typed text).
    const tool = currentTool();
    const schema = tool ? JSON.stringify(tool.inputSchema ?? null) : null;
    if (!tool || view.formTool !== tool.name || view.formSchema !== schema) renderForm();
    drawGraph();
    renderBreakpoints();
    renderControls();
  }

  function selectTool(name) {
    if (name === model.tool) return;
    saveArgs();
    model.tool = name;
    model.highlight = null;
    renderTools();
    renderForm();
    drawGraph();
    renderBreakpoints();
    renderControls();
  }

  function renderTools() {
    const box = $('#tools');
    box.replaceChildren();
    const list = tools();
    if (model.graph && !model.graph.checks) {
      box.append(h('p', { class: 'muted' }, 'No tools: the graph does not check.'));
      return;
    }
    if (list.length === 0) {
      box.append(h('p', { class: 'muted' }, model.graph ? 'The graph has no tools.' : 'Loading\u2026'));
      return;
    }
    // A graph that checks may still have warnings: listed under its tools.
    const warnings = model.graph && Array.isArray(model.graph.diagnostics) ? model.graph.diagnostics : [];
    if (warnings.length > 0) {
      const details = h('details', { class: 'warnings', open: model.warningsOpen },
        h('summary', {}, `${warnings.length} warning${warnings.length === 1 ? '' : 's'}`),
        h('ul', {}, ...warnings.map((d) => h('li', {},
          Number.isInteger(d.line) ? h('span', { class: 'mono' }, `${d.line}:${d.column ?? 1} `) : null,
          d.code ? h('span', { class: 'mono muted' }, `${d.code} `) : null,
          d.message || '',
          d.help ? h('div', { class: 'muted' }, `help: ${d.help}`) : null))));
      details.addEventListener('toggle', () => { model.warningsOpen = details.open; });
      box.append(details);
    }
    for (const tool of list) {
      const button = h('button', {
        type: 'button',
        class: tool.name === model.tool ? 'tool selected' : 'tool',
        'data-tool': tool.name,
        'aria-pressed': tool.name === model.tool ? 'true' : 'false',
        title: tool.description || tool.name,
      },
      h('span', { class: 'tool-name' }, tool.name),
      tool.description ? h('span', { class: 'tool-description' }, tool.description) : null);
      button.addEventListener('click', () => selectTool(tool.name));
      box.append(button);
    }
  }

  function renderDiagnostics() {
    const graph = model.graph;
    const box = $('#diagnostics');
    const failing = !!graph && !graph.checks;
    box.hidden = !failing;
    $('#canvas').hidden = failing;
    $('#legend').hidden = failing;
    const list = $('#diagnostic-list');
    const ol = $('#source ol');
    list.replaceChildren();
    ol.replaceChildren();
    if (!failing) return;

    const diagnostics = Array.isArray(graph.diagnostics) ? graph.diagnostics : [];
    const flagged = new Map(); // line -> worst severity
    const flag = (from, to, severity) => {
      // A long span flags its first lines only.
      for (let n = from; n <= Math.min(to, from + 20); n++) {
        if (flagged.get(n) !== 'error') flagged.set(n, severity);
      }
    };
    for (const d of diagnostics) {
      const line = Number.isInteger(d.line) ? d.line : null;
      // A diagnostic may point into another file (an -m file, a lock file): its lines are not
      // the source shown here.
      const here = !d.file || !graph.file || d.file === graph.file;
      const severity = d.severity || 'error';
      if (line !== null && here) {
        flag(line, Number.isInteger(d.end_line) && d.end_line >= line ? d.end_line : line, severity);
      }
      const others = here && Array.isArray(d.labels)
        ? d.labels.filter((l) => l && Number.isInteger(l.line) && (l.line !== line || l.label !== d.label))
        : [];
      for (const l of others) flag(l.line, l.line, severity);
      const where = line === null ? null : `${here ? '' : (d.file + ':')}${line}:${d.column ?? 1}`;
      const item = h('li', {
        class: `diagnostic severity-${d.severity || 'error'}`,
        'data-line': line,
        tabindex: '0',
        title: line !== null ? `show line ${line}` : null,
      },
      h('div', { class: 'diagnostic-head' },
        h('span', { class: 'severity' }, d.severity || 'error'),
        d.code ? h('span', { class: 'code mono' }, d.code) : null,
        h('span', { class: 'diag-message' }, d.message || ''),
        where ? h('span', { class: 'where mono' }, where) : null),
      d.label ? h('div', { class: 'label' }, d.label) : null,
      ...others.map((l) => h('div', { class: 'label secondary' }, h('span', { class: 'mono' }, `${l.line}:${l.column ?? 1}`), ' ', l.label || '')),
      d.help ? h('div', { class: 'help' }, 'help: ', d.help) : null);
      if (line !== null && here) {
        const go = () => showSourceLine(line);
        item.addEventListener('click', go);
        item.addEventListener('keydown', (e) => {
          if (e.key === 'Enter' || e.key === ' ') {
            e.preventDefault();
            go();
          }
        });
      }
      list.append(item);
    }
    if (diagnostics.length === 0 && graph.rendered) {
      list.append(h('li', { class: 'diagnostic' }, h('pre', { class: 'mono' }, graph.rendered)));
    }

    const lines = String(graph.source ?? '').split('\n');
    if (lines.length > 1 && lines[lines.length - 1] === '') lines.pop();
    lines.forEach((raw, i) => {
      const text = raw.endsWith('\r') ? raw.slice(0, -1) : raw;
      const n = i + 1;
      const severity = flagged.get(n);
      ol.append(h('li', {
        'data-line': n,
        class: severity ? `flagged severity-${severity}` : null,
      }, text === '' ? '\u200b' : text));
    });
  }

  function showSourceLine(line) {
    const target = $(`#source li[data-line="${line}"]`);
    if (!target) return;
    for (const li of document.querySelectorAll('#source li.current')) li.classList.remove('current');
    target.classList.add('current');
    // Vertically only: scrollIntoView would also scroll a long line sideways, past the numbers.
    const box = $('#source');
    box.scrollTo({ top: Math.max(0, target.offsetTop - box.clientHeight / 2), behavior: 'smooth' });
  }

  // ---------------------------------------------------------------- drawing

  const MARKERS = {
    arrow: 'arrow',
    error: 'arrow-error',
    soft: 'arrow-soft',
    taken: 'arrow-taken',
  };

  function markerFor(kind, taken) {
    if (kind === 'onError') return MARKERS.error;
    if (taken) return MARKERS.taken;
    if (kind === 'item' || kind === 'branch') return MARKERS.soft;
    return MARKERS.arrow;
  }

  function pathData(points) {
    return points.map((p, i) => `${i === 0 ? 'M' : 'L'}${p[0]},${p[1]}`).join(' ');
  }

  // The point halfway along a polyline and whether the segment there is more vertical than
  // horizontal, for the edge's label: [x, y, vertical].
  function midpoint(points) {
    if (points.length === 1) return [points[0][0], points[0][1], false];
    let total = 0;
    const lengths = [];
    for (let i = 1; i < points.length; i++) {
      const l = Math.hypot(points[i][0] - points[i - 1][0], points[i][1] - points[i - 1][1]);
      lengths.push(l);
      total += l;
    }
    let rest = total / 2;
    for (let i = 1; i < points.length; i++) {
      const l = lengths[i - 1];
      const dx = points[i][0] - points[i - 1][0];
      const dy = points[i][1] - points[i - 1][1];
      if (rest <= l && l > 0) {
        const t = rest / l;
        return [points[i - 1][0] + dx * t, points[i - 1][1] + dy * t, Math.abs(dy) > Math.abs(dx)];
      }
      rest -= l;
    }
    const last = points[points.length - 1];
    return [last[0], last[1], false];
  }

  // A rough width of text in the drawing's fonts, for the extent before the browser measures it.
  function textWidth(text, charWidth) {
    return String(text).length * charWidth;
  }

  const LABEL_CHAR = 6.4; // px a character of an edge label (10.5 px mono)

  function rectsOverlap(a, b) {
    return a[0] < b[2] && b[0] < a[2] && a[1] < b[3] && b[1] < a[3];
  }

  function lineHitsRect(points, r) {
    for (let i = 1; i < points.length; i++) {
      const [x1, y1] = points[i - 1];
      const [x2, y2] = points[i];
      const steps = Math.max(1, Math.ceil(Math.hypot(x2 - x1, y2 - y1) / 3));
      for (let k = 0; k <= steps; k++) {
        const x = x1 + ((x2 - x1) * k) / steps;
        const y = y1 + ((y2 - y1) * k) / steps;
        if (x > r[0] && x < r[2] && y > r[1] && y < r[3]) return true;
      }
    }
    return false;
  }

  // Where an edge's label goes: near the middle of the edge, beside a vertical stretch (first on
  // the side away from the boxes' middle: a back edge's lane is right of everything it passes,
  // and the server's layout keeps room right of it) or above or below a horizontal one; the
  // first place that covers no box, edge or earlier label, else the one that covers least.
  function labelSpot(label, points, centreX, obstacles) {
    const [mx, my, vertical] = midpoint(points);
    const w = textWidth(label, LABEL_CHAR);
    const candidates = [];
    const side = (dir, d) => candidates.push(dir > 0
      ? { x: mx + d, y: my + 4, anchor: 'start', rect: [mx + d, my - 5, mx + d + w, my + 6] }
      : { x: mx - d, y: my + 4, anchor: 'end', rect: [mx - d - w, my - 5, mx - d, my + 6] });
    const above = (d) => candidates.push({ x: mx, y: my - d, anchor: 'middle', rect: [mx - w / 2, my - d - 9, mx + w / 2, my - d + 2] });
    const below = (d) => candidates.push({ x: mx, y: my + d + 9, anchor: 'middle', rect: [mx - w / 2, my + d, mx + w / 2, my + d + 11] });
    const first = mx >= centreX ? 1 : -1;
    for (const d of [8, 16, 28]) {
      if (vertical) {
        side(first, d);
        side(-first, d);
      } else {
        above(d - 3);
        below(d - 3);
      }
    }
    for (const d of [8, 20]) {
      if (vertical) {
        above(d);
        below(d);
      } else {
        side(first, d);
        side(-first, d);
      }
    }
    return leastCovered(candidates, obstacles);
  }

  // Where a node's count and duration go: a corner just outside its box (above left, above
  // right, below left, below right) that no edge, box or label crosses, so that the text never
  // hides an arrow head; else the corner crossed least.
  const STATS_WIDTH = 76; // "×999 · 0.000 ms" at 10 px
  function statsSpot(n, type, obstacles) {
    const { x, y } = n;
    const w = n.width;
    const hgt = n.height;
    const below = y + hgt + ((type === 'map' || type === 'parallel') ? 8 : 0);
    const mid = y + hgt / 2;
    const right = x + w + ((type === 'map' || type === 'parallel') ? 14 : 6);
    const candidates = [
      { x: x + 1, y: y - 5, anchor: 'start', rect: [x, y - 14, x + STATS_WIDTH, y - 2] },
      { x: x + w - 1, y: y - 5, anchor: 'end', rect: [x + w - STATS_WIDTH, y - 14, x + w, y - 2] },
      { x: x + 1, y: below + 12, anchor: 'start', rect: [x, below + 2, x + STATS_WIDTH, below + 14] },
      { x: x + w - 1, y: below + 12, anchor: 'end', rect: [x + w - STATS_WIDTH, below + 2, x + w, below + 14] },
      { x: right, y: mid + 4, anchor: 'start', rect: [right, mid - 6, right + STATS_WIDTH, mid + 6] },
      // Left of the breakpoint dot.
      { x: x - 18, y: mid + 4, anchor: 'end', rect: [x - 18 - STATS_WIDTH, mid - 6, x - 16, mid + 6] },
    ];
    return leastCovered(candidates, obstacles);
  }

  // The first candidate spot (`{rect}`) that no box or line of `obstacles` crosses; else the one
  // crossed least.
  function leastCovered(candidates, obstacles) {
    let best = candidates[0];
    let bestHits = Infinity;
    for (const c of candidates) {
      let hits = 0;
      for (const r of obstacles.rects) if (rectsOverlap(c.rect, r)) hits += 1;
      for (const line of obstacles.lines) if (lineHitsRect(line, c.rect)) hits += 1;
      if (hits < bestHits) {
        best = c;
        bestHits = hits;
        if (hits === 0) break;
      }
    }
    return best;
  }

  function validPoints(points) {
    return Array.isArray(points)
      ? points.filter((p) => Array.isArray(p) && p.length >= 2 && Number.isFinite(p[0]) && Number.isFinite(p[1]))
      : [];
  }

  // The shapes of a node by its kind; every shape element has class `shape` (coloured by state).
  function nodeShapes(type, x, y, w, hgt) {
    const shapes = [];
    const cls = 'shape';
    switch (type) {
      case 'entry':
      case 'exit':
        shapes.push(s('rect', { class: cls, x, y, width: w, height: hgt, rx: hgt / 2, ry: hgt / 2 }));
        break;
      case 'switch': {
        const inset = Math.min(hgt / 2, 16);
        const pts = [
          [x + inset, y], [x + w - inset, y], [x + w, y + hgt / 2],
          [x + w - inset, y + hgt], [x + inset, y + hgt], [x, y + hgt / 2],
        ].map((p) => p.join(',')).join(' ');
        shapes.push(s('polygon', { class: cls, points: pts }));
        break;
      }
      case 'mcp':
        shapes.push(s('rect', { class: cls, x, y, width: w, height: hgt, rx: 3, ry: 3 }));
        shapes.push(s('rect', { class: 'shape inner', x: x + 3.5, y: y + 3.5, width: Math.max(0, w - 7), height: Math.max(0, hgt - 7), rx: 1.5, ry: 1.5 }));
        break;
      case 'map':
      case 'parallel':
        // The stack sticks out below right, clear of the edges coming in at the top.
        shapes.push(s('rect', { class: 'shape stack', x: x + 8, y: y + 8, width: w, height: hgt, rx: 4, ry: 4 }));
        shapes.push(s('rect', { class: 'shape stack', x: x + 4, y: y + 4, width: w, height: hgt, rx: 4, ry: 4 }));
        shapes.push(s('rect', { class: cls, x, y, width: w, height: hgt, rx: 4, ry: 4 }));
        break;
      case 'ask':
        shapes.push(s('rect', { class: cls, x, y, width: w, height: hgt, rx: 12, ry: 12 }));
        shapes.push(s('path', { class: 'shape ask-tail', d: `M${x + 18},${y + hgt - 0.5} l-6,9 l14,-9` }));
        break;
      case 'item':
      case 'branch':
        shapes.push(s('rect', { class: cls, x, y, width: w, height: hgt, rx: 6, ry: 6 }));
        break;
      default: // transform and anything newer
        shapes.push(s('rect', { class: cls, x, y, width: w, height: hgt, rx: 3, ry: 3 }));
    }
    return shapes;
  }

  function drawGraph() {
    const svg = $('#graph');
    svg.replaceChildren();
    view.nodes.clear();
    view.edges = [];
    const tool = currentTool();
    const empty = $('#empty');
    if (!tool) {
      view.size = null;
      svg.setAttribute('width', '0');
      svg.setAttribute('height', '0');
      svg.removeAttribute('viewBox');
      const failing = model.graph && !model.graph.checks;
      empty.hidden = failing || !model.graph;
      empty.textContent = model.graph ? 'No tool to draw.' : '';
      return;
    }
    empty.hidden = true;

    const nodes = Array.isArray(tool.nodes) ? tool.nodes : [];
    const edges = Array.isArray(tool.edges) ? tool.edges : [];

    // The drawing's extent: what is drawn (the server's size has margins of its own), with room
    // for the breakpoint dots left of the boxes and the counts above them.
    let minX = Infinity;
    let minY = Infinity;
    let maxX = -Infinity;
    let maxY = -Infinity;
    for (const n of nodes) {
      maxX = Math.max(maxX, n.x + n.width + 12);
      maxY = Math.max(maxY, n.y + n.height);
      minX = Math.min(minX, n.x - 18);
      minY = Math.min(minY, n.y - 14);
    }
    for (const e of edges) {
      for (const p of validPoints(e.points)) {
        maxX = Math.max(maxX, p[0]);
        maxY = Math.max(maxY, p[1]);
        minX = Math.min(minX, p[0]);
        minY = Math.min(minY, p[1]);
      }
    }
    if (!Number.isFinite(minX)) {
      minX = 0;
      minY = 0;
      maxX = Number(tool.width) || 100;
      maxY = Number(tool.height) || 100;
    }
    const extent = { minX, minY, maxX, maxY };
    // Labels of vertical stretches go on the side away from the boxes' middle (a back edge's
    // lane is right of everything it passes: its label goes right of it, into the room the
    // server's layout keeps there).
    let boxLeft = Infinity;
    let boxRight = -Infinity;
    for (const n of nodes) {
      boxLeft = Math.min(boxLeft, n.x);
      boxRight = Math.max(boxRight, n.x + n.width);
    }
    const centreX = Number.isFinite(boxLeft) ? (boxLeft + boxRight) / 2 : (minX + maxX) / 2;

    const defs = s('defs');
    for (const [name, id] of Object.entries(MARKERS)) {
      defs.append(s('marker', {
        // userSpaceOnUse: the head keeps its size whatever the edge's stroke width.
        id, viewBox: '0 0 10 10', refX: 9, refY: 5, markerWidth: 9, markerHeight: 9,
        markerUnits: 'userSpaceOnUse', orient: 'auto-start-reverse',
      }, s('path', { d: 'M0,0 L10,5 L0,10 z', class: `arrow-head ${name}` })));
    }
    svg.append(defs);

    const edgeLayer = s('g', { class: 'edges' });
    const nodeLayer = s('g', { class: 'nodes' });
    const labelLayer = s('g', { class: 'edge-labels' });

    // What an edge label should not cover: the boxes, every edge, the labels placed before it.
    const obstacles = {
      rects: nodes.map((n) => {
        const stack = n.type === 'map' || n.type === 'parallel' ? 8 : 0;
        return [n.x, n.y, n.x + n.width + stack, n.y + n.height + stack];
      }),
      lines: edges.map((e) => validPoints(e.points)).filter((p) => p.length >= 2),
    };

    for (const e of edges) {
      const points = validPoints(e.points);
      if (points.length < 2) continue;
      const kind = e.kind || 'next';
      const taken = model.taken.has(`${e.from}\u0000${e.to}`);
      const path = s('path', {
        class: taken ? 'edge taken' : 'edge',
        d: pathData(points),
        'data-from': e.from,
        'data-to': e.to,
        'data-kind': kind,
        'marker-end': `url(#${markerFor(kind, taken)})`,
      });
      if (e.label) path.append(s('title', {}, e.label));
      edgeLayer.append(path);
      view.edges.push({ path, from: e.from, to: e.to, kind });
      if (e.label) {
        const spot = labelSpot(e.label, points, centreX, obstacles);
        obstacles.rects.push(spot.rect);
        extent.minX = Math.min(extent.minX, spot.rect[0]);
        extent.minY = Math.min(extent.minY, spot.rect[1]);
        extent.maxX = Math.max(extent.maxX, spot.rect[2]);
        extent.maxY = Math.max(extent.maxY, spot.rect[3]);
        labelLayer.append(s('text', {
          class: `edge-label kind-${kind}`,
          x: spot.x.toFixed(1),
          y: spot.y.toFixed(1),
          'text-anchor': spot.anchor,
          'data-from': e.from,
          'data-to': e.to,
        }, e.label));
      }
    }

    for (const n of nodes) {
      const type = n.type || 'transform';
      const pseudo = PSEUDO_TYPES.has(type);
      const { x, y } = n;
      const w = n.width;
      const hgt = n.height;
      const g = s('g', {
        class: `node type-${type}${pseudo ? ' pseudo' : ''}`,
        'data-node': n.id,
        'data-type': type,
        'data-state': 'pending',
      });
      const tip = [`${n.id} (${type})`];
      if (n.detail) tip.push(n.detail);
      if (!pseudo) tip.push('click: set or clear a breakpoint');
      g.append(s('title', {}, tip.join('\n')));
      for (const shape of nodeShapes(type, x, y, w, hgt)) g.append(shape);

      const cx = x + w / 2;
      const charW = pseudo ? 6.2 : 7.2;
      const showDetail = !!n.detail && hgt >= 36 && n.detail !== n.id && n.detail !== type;
      const inset = type === 'switch' ? Math.min(hgt / 2, 16) : (type === 'entry' || type === 'exit') ? hgt / 3 : 6;
      const room = w - 2 * inset;
      const mainText = String(pseudo ? (n.label || n.id) : n.id);
      // The whole id always (it names the node); squeezed when it would not fit.
      const squeeze = textWidth(mainText, charW) > room && room > 0;
      g.append(s('text', {
        class: 'node-label',
        x: cx,
        y: showDetail ? y + hgt / 2 - 2 : y + hgt / 2 + 4,
        'text-anchor': 'middle',
        textLength: squeeze ? room.toFixed(1) : null,
        lengthAdjust: squeeze ? 'spacingAndGlyphs' : null,
      }, mainText));
      if (showDetail) {
        g.append(s('text', {
          class: 'node-detail',
          x: cx,
          y: y + hgt / 2 + 11,
          'text-anchor': 'middle',
        }, clip(String(n.detail), Math.floor(room / 6.1))));
      }
      const spot = statsSpot(n, type, obstacles);
      obstacles.rects.push(spot.rect);
      extent.minX = Math.min(extent.minX, spot.rect[0]);
      extent.minY = Math.min(extent.minY, spot.rect[1]);
      extent.maxX = Math.max(extent.maxX, spot.rect[2]);
      extent.maxY = Math.max(extent.maxY, spot.rect[3]);
      const stats = s('text', { class: 'node-stats', x: spot.x, y: spot.y, 'text-anchor': spot.anchor });
      g.append(stats);
      if (!pseudo) {
        g.append(s('circle', { class: 'bp-dot', cx: x - 9, cy: y + hgt / 2, r: 5 }));
        g.setAttribute('tabindex', '0');
        g.setAttribute('role', 'button');
        g.setAttribute('aria-label', `${n.id}: set or clear a breakpoint`);
        g.addEventListener('click', () => toggleBreakpoint(n.id));
        g.addEventListener('keydown', (e) => {
          if (e.key === 'Enter' || e.key === ' ') {
            e.preventDefault();
            toggleBreakpoint(n.id);
          }
        });
      }
      nodeLayer.append(g);
      view.nodes.set(n.id, { g, stats, type });
    }

    svg.append(edgeLayer, nodeLayer, labelLayer);
    for (const id of view.nodes.keys()) renderNode(id);

    // What the browser measured wins over the estimates (labels in particular).
    try {
      if (typeof svg.getBBox === 'function') {
        const box = svg.getBBox();
        if (box && box.width > 0 && box.height > 0) {
          extent.minX = Math.min(extent.minX, box.x);
          extent.minY = Math.min(extent.minY, box.y);
          extent.maxX = Math.max(extent.maxX, box.x + box.width);
          extent.maxY = Math.max(extent.maxY, box.y + box.height);
        }
      }
    } catch (_) {
      // Not drawn yet (a hidden canvas): the estimates stand.
    }
    const pad = 16;
    const vx = Math.floor(extent.minX - pad);
    const vy = Math.floor(extent.minY - pad);
    const vw = Math.ceil(extent.maxX - extent.minX + 2 * pad);
    const vh = Math.ceil(extent.maxY - extent.minY + 2 * pad);
    svg.setAttribute('viewBox', `${vx} ${vy} ${vw} ${vh}`);
    view.size = [vw, vh];
    fitDrawing();
  }

  // A small drawing is shown up to a quarter larger when the canvas has the room; a wide one
  // shrinks to the canvas's width (CSS max-width), a tall one scrolls.
  function fitDrawing() {
    const svg = $('#graph');
    if (!view.size) return;
    const [vw, vh] = view.size;
    const canvas = $('#canvas');
    let k = 1;
    if (canvas && canvas.clientWidth > 0 && canvas.clientHeight > 0) {
      k = Math.min(1.25, (canvas.clientWidth - 26) / vw, (canvas.clientHeight - 26) / vh);
      if (!(k > 1)) k = 1;
    }
    svg.setAttribute('width', String(Math.round(vw * k)));
    svg.setAttribute('height', String(Math.round(vh * k)));
  }

  function renderNode(id) {
    const entry = view.nodes.get(id);
    if (!entry) return;
    const info = model.nodes.get(id);
    const state = info && NODE_STATES.has(info.state) ? info.state : 'pending';
    entry.g.setAttribute('data-state', state);
    const bps = model.breakpoints.get(model.tool);
    toggleAttr(entry.g, 'data-breakpoint', !PSEUDO_TYPES.has(entry.type) && bps && bps.has(id) ? 'true' : null);
    entry.g.classList.toggle('highlight', model.highlight === id);
    entry.g.classList.toggle('asking', !!model.asking && model.asking.question.node === id);
    let text = '';
    if (info && typeof info.count === 'number' && info.count > 0) {
      text = `\u00d7${info.count}`;
      if (typeof info.durationMs === 'number') text += ` \u00b7 ${fmtMs(info.durationMs)} ms`;
    } else if (info && typeof info.durationMs === 'number') {
      text = `${fmtMs(info.durationMs)} ms`;
    }
    entry.stats.textContent = text;
  }

  function renderAllNodes() {
    for (const id of view.nodes.keys()) renderNode(id);
  }

  function markTaken(from, to) {
    const key = `${from}\u0000${to}`;
    if (model.taken.has(key)) return;
    model.taken.add(key);
    for (const e of view.edges) {
      if (e.from === from && e.to === to) {
        e.path.classList.add('taken');
        e.path.setAttribute('marker-end', `url(#${markerFor(e.kind, true)})`);
      }
    }
  }

  function hasEdge(from, to) {
    const tool = currentTool();
    return !!tool && Array.isArray(tool.edges) && tool.edges.some((e) => e.from === from && e.to === to);
  }

  function setHighlight(id) {
    const before = model.highlight;
    model.highlight = id;
    if (before) renderNode(before);
    if (id) {
      renderNode(id);
      const entry = view.nodes.get(id);
      if (entry && typeof entry.g.scrollIntoView === 'function') {
        entry.g.scrollIntoView({ block: 'nearest', inline: 'nearest', behavior: 'smooth' });
      }
    }
  }

  // ---------------------------------------------------------------- breakpoints

  function breakpointSet(tool) {
    let set = model.breakpoints.get(tool);
    if (!set) {
      set = new Set();
      model.breakpoints.set(tool, set);
    }
    return set;
  }

  // The breakpoints of a tool that name its real nodes, in drawing order.
  function breakpointList(tool) {
    const set = model.breakpoints.get(tool.name);
    if (!set) return [];
    return (tool.nodes || [])
      .filter((n) => set.has(n.id) && !PSEUDO_TYPES.has(n.type))
      .map((n) => n.id);
  }

  // The list beside the drawing: the selected tool's breakpoints, each with a button to clear it.
  function renderBreakpoints() {
    const list = $('#breakpoints');
    list.replaceChildren();
    const tool = currentTool();
    const ids = tool ? breakpointList(tool) : [];
    for (const id of ids) {
      const clear = h('button', { type: 'button', title: `clear the breakpoint on ${id}`, 'aria-label': `clear the breakpoint on ${id}` }, '\u00d7');
      clear.addEventListener('click', () => toggleBreakpoint(id));
      list.append(h('li', { 'data-node': id }, id, clear));
    }
    $('#breakpoints-empty').hidden = ids.length > 0;
  }

  function toggleBreakpoint(id) {
    const tool = currentTool();
    if (!tool) return;
    const node = (tool.nodes || []).find((n) => n.id === id);
    if (!node || PSEUDO_TYPES.has(node.type)) return;
    const set = breakpointSet(tool.name);
    if (set.has(id)) set.delete(id);
    else set.add(id);
    renderNode(id);
    renderBreakpoints();
    const run = model.run;
    if (run && !run.superseded && run.tool === tool.name && RUN_ACTIVE.has(run.state)) {
      api('PUT', `/api/runs/${run.id}/breakpoints`, breakpointList(tool))
        .then(() => showMessage(''))
        .catch((err) => showMessage(`breakpoints not set: ${errorText(err)}`));
    }
  }

  // ---------------------------------------------------------------- the input form

  function firstType(schema) {
    const t = schema && schema.type;
    if (Array.isArray(t)) return t.find((x) => x !== 'null') || t[0];
    return t;
  }

  function fieldKind(schema) {
    if (!schema || typeof schema !== 'object') return 'json';
    if (Array.isArray(schema.enum) && schema.enum.length > 0) return 'enum';
    switch (firstType(schema)) {
      case 'string': return 'string';
      case 'number': return 'number';
      case 'integer': return 'integer';
      case 'boolean': return 'boolean';
      default: return 'json';
    }
  }

  function sameJson(a, b) {
    return JSON.stringify(a) === JSON.stringify(b);
  }

  // The fields of a flat object schema, one row each appended to `form` (element ids
  // `${idPrefix}-0`, `${idPrefix}-1`, ...): a checkbox for a boolean, a text input for a string, a
  // number input, a select for an enum, JSON text for anything else; required ones marked.
  // Returns {name, kind, input, schema, required} for each, in the schema's order.
  function buildFields(form, schema, idPrefix) {
    const props = schema.properties && typeof schema.properties === 'object' ? schema.properties : {};
    const required = new Set(Array.isArray(schema.required) ? schema.required : []);
    const names = Object.keys(props);
    const fields = [];
    names.forEach((name, i) => {
      const prop = props[name] || {};
      const kind = fieldKind(prop);
      const id = `${idPrefix}-${i}`;
      const isRequired = required.has(name);
      let input;
      switch (kind) {
        case 'enum': {
          input = h('select', { id, name });
          if (!isRequired || prop.default === undefined) input.append(h('option', { value: '' }, '\u2014'));
          // `enumNames` (as elicitation schemas have them) label the values.
          const labels = Array.isArray(prop.enumNames) && prop.enumNames.length === prop.enum.length ? prop.enumNames : null;
          prop.enum.forEach((v, j) => input.append(h('option', { value: String(j) },
            labels && typeof labels[j] === 'string' ? labels[j] : typeof v === 'string' ? v : JSON.stringify(v))));
          break;
        }
        case 'boolean':
          input = h('input', { id, name, type: 'checkbox' });
          break;
        case 'number':
        case 'integer':
          input = h('input', { id, name, type: 'number', step: kind === 'integer' ? '1' : 'any', inputmode: kind === 'integer' ? 'numeric' : 'decimal' });
          if (typeof prop.minimum === 'number') input.min = String(prop.minimum);
          if (typeof prop.maximum === 'number') input.max = String(prop.maximum);
          break;
        case 'string':
          input = h('input', { id, name, type: 'text', spellcheck: 'false' });
          if (typeof prop.maxLength === 'number') input.maxLength = prop.maxLength;
          break;
        default:
          input = h('textarea', {
            id, name, rows: '3', spellcheck: 'false', class: 'mono',
            placeholder: firstType(prop) === 'array' ? '[ ]' : firstType(prop) === 'object' ? '{ }' : 'JSON',
          });
      }
      if (isRequired) {
        input.required = true;
        input.setAttribute('aria-required', 'true');
      }
      const typeText = kind === 'enum' ? 'enum' : (Array.isArray(prop.type) ? prop.type.join(' | ') : (prop.type || 'any'));
      const label = h('label', { for: id, class: 'field-name' },
        h('span', { class: 'mono' }, name),
        isRequired ? h('span', { class: 'required', title: 'required' }, '*') : null,
        h('span', { class: 'field-type' }, typeText));
      const row = h('div', { class: `field kind-${kind}` });
      if (kind === 'boolean') {
        row.append(h('div', { class: 'field-inline' }, input, label));
      } else {
        row.append(label, input);
      }
      if (prop.description) row.append(h('div', { class: 'field-help' }, prop.description));
      form.append(row);
      const field = { name, kind, input, schema: prop, required: isRequired };
      if (kind === 'boolean') {
        // An optional boolean without a default starts unset (indeterminate) and is then left out.
        input.addEventListener('change', () => { input.indeterminate = false; });
      }
      fields.push(field);
    });
    return fields;
  }

  function renderForm() {
    const form = $('#input-form');
    form.replaceChildren();
    view.fields = [];
    view.extraArgs = {};
    showFormError('');
    const tool = currentTool();
    view.formTool = tool ? tool.name : null;
    view.formSchema = tool ? JSON.stringify(tool.inputSchema ?? null) : null;
    $('#tool-description').textContent = tool && tool.description ? tool.description : '';
    if (!tool) {
      $('#raw-json').value = '';
      return;
    }
    const schema = tool.inputSchema && typeof tool.inputSchema === 'object' ? tool.inputSchema : {};
    view.fields = buildFields(form, schema, 'arg');
    if (view.fields.length === 0) {
      form.append(h('p', { class: 'muted' }, 'This tool takes no arguments.'));
    }

    // Saved values for this tool, else the schema's defaults.
    const saved = model.savedArgs.get(tool.name);
    if (saved && typeof saved === 'object') {
      fillForm(saved);
    } else {
      const defaults = {};
      for (const f of view.fields) if (f.schema.default !== undefined) defaults[f.name] = f.schema.default;
      if (schema.default && typeof schema.default === 'object') Object.assign(defaults, schema.default);
      fillForm(defaults);
    }
    if ($('#raw-toggle').checked) syncFormToRaw();
  }

  function setField(field, has, value) {
    const input = field.input;
    switch (field.kind) {
      case 'enum': {
        const j = has ? field.schema.enum.findIndex((v) => sameJson(v, value)) : -1;
        input.value = j >= 0 ? String(j) : (input.querySelector('option[value=""]') ? '' : '0');
        break;
      }
      case 'boolean':
        input.checked = has && value === true;
        input.indeterminate = !has && !field.required && field.schema.default === undefined;
        break;
      case 'number':
      case 'integer':
        input.value = has && value !== null ? String(value) : '';
        break;
      case 'string':
        input.value = has && value !== null ? (typeof value === 'string' ? value : JSON.stringify(value)) : '';
        break;
      default:
        input.value = has ? JSON.stringify(value, null, 2) : '';
    }
  }

  // Returns [has, value]; throws on text that cannot be a value.
  function readField(field) {
    const input = field.input;
    switch (field.kind) {
      case 'enum':
        if (input.value === '') return [false];
        return [true, field.schema.enum[Number(input.value)]];
      case 'boolean':
        if (input.indeterminate) return [false];
        return [true, input.checked];
      case 'number':
      case 'integer': {
        const text = input.value.trim();
        if (text === '') {
          if (input.validity && input.validity.badInput) throw new Error(`${field.name}: not a number`);
          return [false];
        }
        const n = Number(text);
        if (!Number.isFinite(n)) throw new Error(`${field.name}: not a number`);
        return [true, n];
      }
      case 'string':
        if (input.value === '') return [false];
        return [true, input.value];
      default: {
        const text = input.value.trim();
        if (text === '') return [false];
        try {
          return [true, JSON.parse(text)];
        } catch (err) {
          throw new Error(`${field.name}: not JSON (${errorText(err)})`);
        }
      }
    }
  }

  function readForm() {
    const args = {};
    for (const [k, v] of Object.entries(view.extraArgs)) args[k] = v;
    for (const f of view.fields) {
      const [has, value] = readField(f);
      if (has) args[f.name] = value;
      else delete args[f.name];
    }
    return args;
  }

  function fillForm(obj) {
    const args = obj && typeof obj === 'object' && !Array.isArray(obj) ? obj : {};
    const known = new Set(view.fields.map((f) => f.name));
    view.extraArgs = {};
    for (const [k, v] of Object.entries(args)) if (!known.has(k)) view.extraArgs[k] = v;
    for (const f of view.fields) setField(f, Object.prototype.hasOwnProperty.call(args, f.name), args[f.name]);
  }

  function readRaw() {
    const text = $('#raw-json').value.trim();
    if (text === '') return {};
    try {
      return JSON.parse(text);
    } catch (err) {
      throw new Error(`arguments: not JSON (${errorText(err)})`);
    }
  }

  // The arguments to send: from the raw JSON in raw mode, else from the form.
  function collectArguments() {
    return $('#raw-toggle').checked ? readRaw() : readForm();
  }

  function saveArgs() {
    if (!view.formTool) return;
    try {
      model.savedArgs.set(view.formTool, collectArguments());
    } catch (_) {
      // Half-typed JSON is not kept.
    }
  }

  function syncFormToRaw() {
    let args;
    try {
      args = readForm();
    } catch (err) {
      showFormError(errorText(err));
      return;
    }
    $('#raw-json').value = JSON.stringify(args, null, 2);
  }

  function showFormError(text) {
    const box = $('#form-error');
    box.textContent = text || '';
    box.hidden = !text;
  }

  function setRawMode(raw) {
    const toggle = $('#raw-toggle');
    if (raw) {
      syncFormToRaw();
      toggle.checked = true;
    } else {
      let args;
      try {
        args = readRaw();
      } catch (err) {
        showFormError(`${errorText(err)}: fix it to go back to the form`);
        toggle.checked = true;
        return;
      }
      fillForm(args);
      toggle.checked = false;
      showFormError('');
    }
    $('#raw-json').hidden = !toggle.checked;
    $('#input-form').hidden = toggle.checked;
  }

  // ---------------------------------------------------------------- runs

  function resetRunView() {
    model.nodes.clear();
    model.records.clear();
    model.result = null;
    model.lastDone = null;
    model.taken.clear();
    model.highlight = null;
    model.expanded = null;
    model.asking = null;
    hideAsk();
    for (const e of view.edges) {
      e.path.classList.remove('taken');
      e.path.setAttribute('marker-end', `url(#${markerFor(e.kind, false)})`);
    }
    renderAllNodes();
    renderHistory();
    renderResult();
  }

  // Makes `id` the run the page shows if it is newer than the one shown; false for an older run's
  // late events, which are dropped.
  // `fresh`: the id comes from the server's answer to our POST, so it is the newest run even if it
  // is smaller (a restarted server counts from 1 again).
  function acceptRun(id, tool, initialState, fresh = false) {
    if (typeof id !== 'number') return !!model.run && !model.run.superseded;
    // The run a new one replaced: its last events (its stop) come after the new one started.
    if (model.run && model.run.superseded && id === model.run.id) return false;
    if (model.run && id < model.run.id && !fresh && !model.run.gone) return false;
    if (!model.run || id !== model.run.id) {
      model.run = { id, tool: tool || null, state: initialState || 'running', pausedAt: null };
      resetRunView();
      if (tool && tool !== model.tool && tools().some((t) => t.name === tool)) selectTool(tool);
    } else if (tool && !model.run.tool) {
      model.run.tool = tool;
    }
    return true;
  }

  // The run's state and where it waits change together, on `run` events only, so that
  // `data-state` and `data-paused-at` never disagree.
  function onRunEvent(ev) {
    if (!acceptRun(ev.run, ev.tool, ev.state)) return;
    if (typeof ev.state === 'string') model.run.state = ev.state;
    if (model.run.state === 'paused') {
      // `pausedAt` is sent by the server; else the node the last `paused` event named.
      model.run.pausedAt = typeof ev.pausedAt === 'string' ? ev.pausedAt : pausedNode();
    } else {
      model.run.pausedAt = null;
    }
    renderRunState();
    renderControls();
  }

  function pausedNode() {
    for (const [id, info] of model.nodes) if (info.state === 'paused') return id;
    return null;
  }

  function onNodeEvent(ev) {
    if (!acceptRun(ev.run)) return;
    const id = ev.node;
    if (typeof id !== 'string') return;
    const before = model.nodes.get(id) || {};
    const info = {
      state: ev.state,
      durationMs: typeof ev.durationMs === 'number' ? ev.durationMs : before.durationMs,
      count: typeof ev.count === 'number' ? ev.count : before.count,
    };
    model.nodes.set(id, info);
    if (ev.state === 'running' || ev.state === 'paused') {
      if (model.lastDone && model.lastDone !== id && hasEdge(model.lastDone, id)) markTaken(model.lastDone, id);
    }
    if (ev.state === 'done' || ev.state === 'failed') model.lastDone = id;
    if (ev.state === 'paused') {
      // The run waits before one node at a time.
      for (const [other, o] of model.nodes) if (other !== id && o.state === 'paused') unpause(other);
    }
    renderNode(id);
    renderRunState();
    renderControls();
  }

  // A node the run no longer waits before (or, `running` too, that a stop cut short) goes back
  // to pending.
  function unpause(id, running = false) {
    const info = model.nodes.get(id);
    if (info && (info.state === 'paused' || (running && info.state === 'running'))) {
      info.state = 'pending';
      renderNode(id);
    }
  }

  function onRecordEvent(ev) {
    if (!acceptRun(ev.run)) return;
    const rec = ev.record;
    if (!rec || typeof rec.index !== 'number') return;
    model.records.set(rec.index, rec);
    renderRecord(rec);
    renderHistoryCount();
  }

  function onEndEvent(ev) {
    if (!acceptRun(ev.run)) return;
    if (typeof ev.state === 'string') model.run.state = ev.state;
    model.run.pausedAt = null;
    // As the server's snapshot has it: nothing waits any more, and a node that was running when
    // the run was stopped did not finish.
    for (const [id, info] of model.nodes) {
      if (info.state === 'paused' || (ev.state === 'stopped' && info.state === 'running')) unpause(id, true);
    }
    model.result = { state: ev.state, result: ev.result, error: ev.error || null };
    // Nothing waits on an answer any more (a `withdrawn` notice stays its while).
    setAsking(null);
    renderResult();
    renderRunState();
    renderControls();
  }

  function onEvent(ev) {
    if (!ev || typeof ev !== 'object') return;
    switch (ev.type) {
      case 'graph':
        if (!model.graph || typeof ev.version !== 'number' || ev.version !== model.graph.version) loadGraph();
        break;
      case 'run':
        onRunEvent(ev);
        break;
      case 'node':
        onNodeEvent(ev);
        break;
      case 'record':
        onRecordEvent(ev);
        break;
      case 'end':
        onEndEvent(ev);
        break;
      case 'ask':
        onAskEvent(ev);
        break;
      case 'answered':
        onAnsweredEvent(ev);
        break;
      case 'hello':
        onHello(ev);
        break;
      case 'resync':
        // Fell behind: the file's version and the latest run as they are now, like hello.
        model.reconnected = true;
        onHello(ev);
        break;
      default:
        break;
    }
  }

  async function startRun() {
    const tool = currentTool();
    if (!tool) return;
    let args;
    try {
      args = collectArguments();
    } catch (err) {
      showFormError(errorText(err));
      return;
    }
    showFormError('');
    showMessage('');
    model.savedArgs.set(tool.name, args);
    const body = {
      tool: tool.name,
      arguments: args,
      breakpoints: breakpointList(tool),
      startPaused: $('#start-paused').checked,
    };
    // Until the new run's first event, the page shows a run starting, not the one before (whose
    // late events are dropped from here on).
    const before = model.run && !model.run.gone ? model.run.id : -1;
    model.run = { id: before, tool: tool.name, state: 'running', pausedAt: null, superseded: true };
    resetRunView();
    renderRunState();
    renderControls();
    try {
      const answer = await api('POST', '/api/runs', body);
      if (answer && typeof answer.run === 'number') acceptRun(answer.run, tool.name, 'running', true);
    } catch (err) {
      showMessage(`run not started: ${errorText(err)}`);
      if (model.run && model.run.superseded) model.run = null;
    } finally {
      renderRunState();
      renderControls();
    }
  }

  async function control(action) {
    const run = model.run;
    if (!run) return;
    showMessage('');
    try {
      // The server's answer is the run's state, but the page follows the events only, so that
      // what it shows is what the events said, in their order.
      await api('POST', `/api/runs/${run.id}/${action}`, {});
    } catch (err) {
      showMessage(`${action}: ${errorText(err)}`);
    }
  }

  // Catching up with a run (after a reconnect, when the stream fell behind, or a run that was
  // going on when the page opened): its snapshot, then the events that came meanwhile, in order
  // (the server publishes under the run's lock, so the snapshot and the events after it agree;
  // events the snapshot already holds set the same values again).
  const sync = { pending: 0, queue: [] };

  function dispatch(ev) {
    if (sync.pending > 0) sync.queue.push(ev);
    else applyEvent(ev);
  }

  function applyEvent(ev) {
    try {
      onEvent(ev);
    } catch (err) {
      showMessage(`event not shown: ${errorText(err)}`);
    }
  }

  async function resync(id) {
    if (typeof id !== 'number') return;
    sync.pending += 1;
    try {
      const snap = await api('GET', `/api/runs/${id}`);
      applySnapshot(snap);
    } catch (_) {
      // The run is gone (only the latest is kept): what the page shows stands.
    } finally {
      sync.pending -= 1;
      if (sync.pending === 0) {
        const queued = sync.queue;
        sync.queue = [];
        for (const ev of queued) applyEvent(ev);
      }
    }
  }

  function applySnapshot(snap) {
    if (!snap || typeof snap.run !== 'number') return;
    // A snapshot is older than a run the page already follows (one it started meanwhile); it
    // wins over a run a restarted server no longer has.
    const fresh = !model.run || !!model.run.gone;
    if (!acceptRun(snap.run, snap.tool, snap.state, fresh)) return;
    const run = model.run;
    if (typeof snap.state === 'string') run.state = snap.state;
    run.pausedAt = run.state === 'paused' && typeof snap.pausedAt === 'string' ? snap.pausedAt : null;
    if (snap.nodes && typeof snap.nodes === 'object') {
      model.nodes.clear();
      for (const [id, info] of Object.entries(snap.nodes)) model.nodes.set(id, { ...info });
      if (run.pausedAt) model.nodes.set(run.pausedAt, { ...(model.nodes.get(run.pausedAt) || {}), state: 'paused' });
    }
    if (Array.isArray(snap.records)) {
      model.records.clear();
      for (const rec of snap.records) if (rec && typeof rec.index === 'number') model.records.set(rec.index, rec);
      // The edges the run went along, as the events would have marked them: from each node to
      // the next one that finished, and to the node it waits before.
      const order = [...model.records.values()].sort((a, b) => a.index - b.index).map((r) => r.node);
      if (run.pausedAt) order.push(run.pausedAt);
      for (let i = 1; i < order.length; i++) {
        if (order[i - 1] !== order[i] && hasEdge(order[i - 1], order[i])) markTaken(order[i - 1], order[i]);
      }
      model.lastDone = snap.records.length ? snap.records[snap.records.length - 1].node : null;
    }
    // The run's breakpoints are the tool's (a run started elsewhere brings its own).
    if (Array.isArray(snap.breakpoints) && typeof snap.tool === 'string') {
      model.breakpoints.set(snap.tool, new Set(snap.breakpoints.filter((b) => typeof b === 'string')));
      renderBreakpoints();
    }
    model.result = RUN_ACTIVE.has(run.state) ? null : { state: run.state, result: snap.result, error: snap.error || null };
    setAsking(RUN_ACTIVE.has(run.state) && snap.asking && typeof snap.asking === 'object' ? snap.asking : null);
    renderAllNodes();
    renderHistory();
    renderResult();
    renderRunState();
    renderControls();
  }

  // The first event of every connection: the file's version and the latest run.
  function onHello(ev) {
    if (typeof ev.version === 'number' && (!model.graph || ev.version !== model.graph.version)) loadGraph();
    const reconnected = model.reconnected;
    model.reconnected = false;
    if (typeof ev.run === 'number') {
      if (reconnected || !model.run || model.run.id !== ev.run || model.run.gone) resync(ev.run);
    } else if (model.run) {
      // A server that has no run (restarted): the next run it starts counts from 1 again.
      model.run.gone = true;
    }
  }

  // ---------------------------------------------------------------- questions (ask nodes)

  const WITHDRAWN_MS = 2500; // how long "withdrawn" stays up
  let askTimer = null;

  function clearAskTimer() {
    if (askTimer) {
      clearTimeout(askTimer);
      askTimer = null;
    }
  }

  // The question the run waits on, or null; redraws the panel and the asking node.
  function setAsking(question) {
    const before = model.asking ? model.asking.question.node : null;
    const valid = question && typeof question === 'object' && typeof question.node === 'string';
    model.asking = valid && model.run ? { run: model.run.id, question } : null;
    const now = model.asking ? model.asking.question.node : null;
    if (!model.asking) view.askKey = null;
    if (before && before !== now) renderNode(before);
    if (now) renderNode(now);
    renderAsk();
    renderRunState();
  }

  function hideAsk() {
    clearAskTimer();
    view.askKey = null;
    view.askFields = [];
    const panel = $('#ask');
    panel.hidden = true;
    panel.setAttribute('data-state', 'none');
    panel.removeAttribute('data-node');
    $('#ask-form').replaceChildren();
    showAskError('');
    $('#ask-status').hidden = true;
  }

  function setAskEnabled(enabled) {
    $('#ask-accept').disabled = !enabled;
    $('#ask-decline').disabled = !enabled;
    for (const f of view.askFields) f.input.disabled = !enabled;
  }

  function showAskError(text) {
    const box = $('#ask-error');
    box.textContent = text || '';
    box.hidden = !text;
  }

  function renderAsk() {
    const panel = $('#ask');
    const asking = model.asking;
    if (!asking) {
      // The `withdrawn` notice hides itself; anything else goes now.
      if (panel.getAttribute('data-state') !== 'withdrawn') hideAsk();
      return;
    }
    const q = asking.question;
    const key = `${asking.run}\u0000${JSON.stringify(q)}`;
    // The same question again (a snapshot after a reconnect): what is typed stays.
    if (view.askKey === key && !panel.hidden) return;
    clearAskTimer();
    view.askKey = key;
    panel.hidden = false;
    panel.setAttribute('data-state', 'asking');
    panel.setAttribute('data-node', q.node);
    $('#ask-node').textContent = q.node;
    $('#ask-message').textContent = typeof q.message === 'string' ? q.message : pretty(q.message);
    const seconds = typeof q.timeoutMs === 'number' && q.timeoutMs > 0 ? q.timeoutMs / 1000 : null;
    $('#ask-timeout').textContent = seconds === null ? ''
      : `withdrawn after ${seconds >= 10 ? Math.round(seconds) : seconds.toFixed(1)} s without an answer`;
    $('#ask-status').hidden = true;
    showAskError('');
    const form = $('#ask-form');
    form.replaceChildren();
    const schema = q.schema && typeof q.schema === 'object' ? q.schema : {};
    view.askFields = buildFields(form, schema, 'ask-field');
    // The schema's defaults; a required boolean without one starts unchecked (false).
    for (const f of view.askFields) {
      const has = f.schema.default !== undefined;
      setField(f, has, f.schema.default);
    }
    setAskEnabled(true);
    // Nothing else has the focus: the answer is what the page waits for.
    if (document.activeElement === document.body || document.activeElement === null) {
      const first = view.askFields.length ? view.askFields[0].input : $('#ask-accept');
      first.focus({ preventScroll: true });
    }
  }

  // Shows that the question was taken back (its timeout, a stop), then hides the panel.
  function showWithdrawn() {
    const panel = $('#ask');
    if (panel.hidden) return;
    panel.setAttribute('data-state', 'withdrawn');
    view.askKey = null;
    setAskEnabled(false);
    showAskError('');
    const status = $('#ask-status');
    status.textContent = 'The question was withdrawn: no answer is needed any more.';
    status.hidden = false;
    clearAskTimer();
    askTimer = setTimeout(() => {
      askTimer = null;
      if (!model.asking) hideAsk();
    }, WITHDRAWN_MS);
  }

  // The answer as the form has it; throws on a field that is not filled in as its schema says.
  function readAnswer() {
    const content = {};
    for (const f of view.askFields) {
      // The browser's own checks of what the inputs carry (required, min, max, maxLength); a
      // checkbox is answered either way.
      if (f.kind !== 'boolean' && typeof f.input.checkValidity === 'function' && !f.input.checkValidity()) {
        throw new Error(`${f.name}: ${f.input.validationMessage || 'not valid'}`);
      }
      const [has, value] = readField(f);
      if (has) content[f.name] = value;
      else if (f.required) throw new Error(`${f.name}: required`);
    }
    return content;
  }

  async function answer(action) {
    const asking = model.asking;
    if (!asking) return;
    let body;
    if (action === 'accept') {
      try {
        body = { action: 'accept', content: readAnswer() };
      } catch (err) {
        showAskError(errorText(err));
        return;
      }
    } else {
      body = { action: 'decline' };
    }
    showAskError('');
    setAskEnabled(false);
    try {
      // The `answered` event hides the panel.
      await api('POST', `/api/runs/${asking.run}/answer`, body);
    } catch (err) {
      if (model.asking === asking) {
        setAskEnabled(true);
        showAskError(`answer not taken: ${errorText(err)}`);
      }
    }
  }

  function onAskEvent(ev) {
    if (!acceptRun(ev.run)) return;
    if (!ev.question || typeof ev.question !== 'object') return;
    setAsking(ev.question);
  }

  function onAnsweredEvent(ev) {
    if (!acceptRun(ev.run)) return;
    if (!model.asking) return;
    if (typeof ev.node === 'string' && ev.node !== model.asking.question.node) return;
    if (ev.withdrawn === true) showWithdrawn();
    setAsking(null);
  }

  // ---------------------------------------------------------------- status and controls

  function renderConn() {
    const conn = $('#conn');
    conn.setAttribute('data-conn', model.conn);
    conn.textContent = { connecting: 'connecting\u2026', connected: 'connected', reconnecting: 'reconnecting\u2026' }[model.conn] || model.conn;
  }

  function renderRunState() {
    const box = $('#run-state');
    const run = model.run;
    const state = run ? run.state : 'idle';
    box.setAttribute('data-state', state);
    toggleAttr(box, 'data-paused-at', run && run.pausedAt ? run.pausedAt : null);
    if (!run) {
      box.textContent = 'no run';
      return;
    }
    if (run.superseded) {
      box.textContent = `starting ${run.tool}\u2026`;
      return;
    }
    let text = `run ${run.id}${run.tool ? ' of ' + run.tool : ''}: `;
    if (run.pausedAt) text += `paused before ${run.pausedAt}`;
    else if (model.asking && state === 'running') text += `waiting for an answer at ${model.asking.question.node}`;
    else text += state;
    box.textContent = text;
  }

  function renderControls() {
    const state = model.run && !model.run.superseded ? model.run.state : 'idle';
    const canRun = !!currentTool() && !!model.graph && !!model.graph.checks;
    $('#run').disabled = !canRun;
    $('#step').disabled = state !== 'paused';
    $('#continue').disabled = state !== 'paused';
    $('#pause').disabled = state !== 'running';
    $('#stop').disabled = !RUN_ACTIVE.has(state);
  }

  // ---------------------------------------------------------------- history

  let tbodyElement = null;
  function historyBody() {
    if (!tbodyElement) tbodyElement = $('#history tbody');
    return tbodyElement;
  }

  function renderHistoryCount() {
    const n = model.records.size;
    $('#history-count').textContent = n ? `${n} record${n === 1 ? '' : 's'}` : '';
  }

  function renderHistory() {
    const tbody = historyBody();
    tbody.replaceChildren();
    view.rows.clear();
    view.maxRow = -1;
    const indexes = [...model.records.keys()].sort((a, b) => a - b);
    for (const i of indexes) renderRecord(model.records.get(i));
    renderHistoryCount();
  }

  function recordCells(rec) {
    let outputCell;
    if (rec.error && (rec.output === null || rec.output === undefined)) {
      outputCell = h('td', { class: 'output error-text', title: String(rec.error) }, clip(String(rec.error), 80));
    } else if (rec.truncated) {
      outputCell = h('td', { class: 'output muted', title: 'the run keeps outputs up to a size' }, '(not kept)');
    } else {
      outputCell = h('td', { class: 'output mono', title: preview(rec.output, 400) }, preview(rec.output));
    }
    return [
      h('td', { class: 'num' }, String(rec.index)),
      h('td', { class: 'node-cell mono' }, rec.node ?? ''),
      h('td', { class: 'type-cell' }, rec.type ?? ''),
      h('td', { class: 'num' }, fmtMs(rec.startMs)),
      h('td', { class: 'num' }, fmtMs(rec.durationMs)),
      h('td', { class: 'num' }, rec.attempts !== undefined ? String(rec.attempts) : ''),
      outputCell,
      h('td', { class: rec.failureKind ? 'failure has-failure' : 'failure' }, rec.failureKind ?? ''),
    ];
  }

  function renderRecord(rec) {
    const tbody = historyBody();
    let tr = view.rows.get(rec.index);
    if (tr) {
      tr.replaceChildren(...recordCells(rec));
      tr.setAttribute('data-node', rec.node ?? '');
      tr.classList.toggle('failed', !!rec.failureKind || !!rec.error);
      return;
    }
    tr = h('tr', {
      class: rec.failureKind || rec.error ? 'record failed' : 'record',
      'data-index': rec.index,
      'data-node': rec.node ?? '',
      tabindex: '0',
    }, ...recordCells(rec));
    tr.addEventListener('click', () => toggleDetail(rec.index));
    tr.addEventListener('keydown', (e) => {
      if (e.key === 'Enter' || e.key === ' ') {
        e.preventDefault();
        toggleDetail(rec.index);
      }
    });
    // Keep the rows in index order (records normally come in order: append).
    let before = null;
    if (rec.index < view.maxRow) {
      for (const [i, row] of view.rows) {
        if (i > rec.index && (!before || i < Number(before.getAttribute('data-index')))) before = row;
      }
    }
    view.maxRow = Math.max(view.maxRow, rec.index);
    view.rows.set(rec.index, tr);
    if (before) tbody.insertBefore(tr, before);
    else tbody.append(tr);
    const wrap = tbody.closest('.table-wrap');
    if (!before && wrap && model.expanded === null) {
      // Follow the run while the view is at the bottom.
      if (wrap.scrollHeight - wrap.scrollTop - wrap.clientHeight < 80) wrap.scrollTop = wrap.scrollHeight;
    }
  }

  function closeDetail() {
    const open = $('#history tbody tr.record-detail');
    if (open) open.remove();
    for (const row of document.querySelectorAll('#history tr.record.expanded')) row.classList.remove('expanded');
    model.expanded = null;
  }

  async function toggleDetail(index) {
    const rec = model.records.get(index);
    const tr = view.rows.get(index);
    if (!rec || !tr) return;
    const wasOpen = model.expanded === index;
    closeDetail();
    if (wasOpen) {
      setHighlight(null);
      return;
    }
    setHighlight(rec.node);
    model.expanded = index;
    tr.classList.add('expanded');
    const failedOnly = !!rec.error && (rec.output === null || rec.output === undefined);
    const outText = failedOnly ? String(rec.error)
      : rec.truncated ? '(the output was not kept: the run keeps outputs up to a size)'
        : rec.output !== undefined ? pretty(rec.output) : '(no output)';
    const outPre = h('pre', { class: 'output mono' }, outText);
    const ctxPre = h('pre', { class: 'context mono loading' }, 'loading\u2026');
    const detail = h('tr', { class: 'record-detail', 'data-index': index },
      h('td', { colspan: '8' },
        h('div', { class: 'detail-grid' },
          h('div', { class: 'detail-part' },
            h('h3', {}, failedOnly ? 'error' : 'output'),
            outPre,
            rec.error && !failedOnly ? h('p', { class: 'error-text' }, String(rec.error)) : null),
          h('div', { class: 'detail-part' },
            h('h3', {}, `context ${rec.node ?? ''} saw`),
            ctxPre))));
    tr.after(detail);
    const run = model.run;
    if (!run) {
      ctxPre.textContent = '(no run)';
      return;
    }
    try {
      const full = await api('GET', `/api/runs/${run.id}/records/${index}`);
      if (!detail.isConnected) return;
      ctxPre.classList.remove('loading');
      ctxPre.textContent = full && full.context !== undefined ? pretty(full.context) : '(no context)';
      if (full && full.contextTruncated) {
        ctxPre.after(h('p', { class: 'muted' }, 'Some outputs before this node were not kept (too large).'));
      }
    } catch (err) {
      if (!detail.isConnected) return;
      ctxPre.classList.remove('loading');
      ctxPre.textContent = `could not load the context: ${errorText(err)}`;
    }
  }

  // ---------------------------------------------------------------- result

  function renderResult() {
    const box = $('#result');
    const r = model.result;
    const state = r && ['done', 'failed', 'stopped'].includes(r.state) ? r.state : 'none';
    box.setAttribute('data-state', state);
    const pre = $('#result pre');
    const meta = $('#result-meta');
    meta.replaceChildren();
    $('#result-empty').hidden = state !== 'none';
    pre.hidden = state === 'none';
    if (state === 'none') {
      pre.textContent = '';
      return;
    }
    const err = r.error;
    if (state === 'done') {
      pre.textContent = pretty(r.result);
      meta.append(h('span', { class: 'badge done' }, 'done'));
    } else {
      pre.textContent = err && err.message ? String(err.message) : (state === 'stopped' ? 'The run was stopped.' : 'The run failed.');
      meta.append(h('span', { class: `badge ${state}` }, state));
      if (err && err.kind) meta.append(h('span', { class: 'badge kind mono' }, err.kind));
      if (err && err.node) {
        const node = h('button', { type: 'button', class: 'link mono', title: 'highlight the node' }, `at ${err.node}`);
        node.addEventListener('click', () => setHighlight(err.node));
        meta.append(node);
      }
    }
  }

  // ---------------------------------------------------------------- events

  let source = null;
  let retryTimer = null;

  function connect() {
    if (retryTimer) {
      clearTimeout(retryTimer);
      retryTimer = null;
    }
    source = new EventSource('/api/events');
    source.onopen = () => {
      model.conn = 'connected';
      renderConn();
    };
    source.onmessage = (msg) => {
      let ev;
      try {
        ev = JSON.parse(msg.data);
      } catch (_) {
        return;
      }
      dispatch(ev);
    };
    source.onerror = () => {
      // The next connection's `hello` says whether to catch up.
      model.reconnected = true;
      model.conn = 'reconnecting';
      renderConn();
      if (source.readyState === EventSource.CLOSED) {
        // The browser gave up (for example a non-200 answer): try again ourselves.
        source.close();
        retryTimer = setTimeout(connect, 2000);
      }
    };
  }

  // ---------------------------------------------------------------- start

  function init() {
    $('#run').addEventListener('click', startRun);
    $('#step').addEventListener('click', () => control('step'));
    $('#continue').addEventListener('click', () => control('continue'));
    $('#pause').addEventListener('click', () => control('pause'));
    $('#stop').addEventListener('click', () => control('stop'));
    $('#input-form').addEventListener('submit', (e) => {
      e.preventDefault();
      startRun();
    });
    $('#raw-toggle').addEventListener('change', (e) => setRawMode(e.target.checked));
    $('#ask-accept').addEventListener('click', () => answer('accept'));
    $('#ask-decline').addEventListener('click', () => answer('decline'));
    $('#ask-form').addEventListener('submit', (e) => {
      e.preventDefault();
      answer('accept');
    });
    $('#raw-json').addEventListener('input', () => {
      // Keep the form in step with valid raw JSON as it is typed.
      try {
        fillForm(readRaw());
        showFormError('');
      } catch (_) {
        // Shown when it matters: on run or on leaving raw mode.
      }
    });
    $('#raw-json').addEventListener('keydown', (e) => {
      if (e.key === 'Enter' && (e.ctrlKey || e.metaKey)) {
        e.preventDefault();
        startRun();
      }
    });
    $('#raw-toggle').checked = false; // a reload may restore it; the form is the starting mode
    window.addEventListener('resize', fitDrawing);
    renderConn();
    renderRunState();
    renderControls();
    renderResult();
    renderTools();
    connect();
    loadGraph();
  }

  if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', init);
  else init();
})();
