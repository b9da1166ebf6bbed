// The drawing of a graph chat (speaker_selection method "graph"): its
// nodes and edges laid out left to right in layers, edge conditions as
// labels, joins marked all or any, the start nodes marked; and, as the
// chat's events arrive, which nodes run now, which have run and which
// wait. Plain SVG made here; names and conditions are only ever inserted
// as text.

const SVG = 'http://www.w3.org/2000/svg';

/** svg builds an SVG element: svg('rect', {x: 1}, child, …); strings become text. */
function svg(tag, attrs = {}, ...children) {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    e.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

/** graphOf is a spec's graph (its speaker_selection's), or null for a chat of another method. */
export function graphOf(spec) {
  const sel = spec?.speaker_selection;
  if (sel?.method !== 'graph' || !sel.graph?.nodes || typeof sel.graph.nodes !== 'object') return null;
  return sel.graph;
}

/** conditionText is an edge's condition as text, or null when the edge is always taken. */
function conditionText(e) {
  return typeof e.condition === 'string' ? e.condition : null;
}

/** short cuts a label to n characters. */
function short(s, n) { return s.length > n ? s.slice(0, n - 1) + '…' : s; }

// Sizes of the drawing, in SVG units (pixels at scale 1).
const NODE_H = 34;
const ROW = 62; // from one node's top to the next one's in a layer
const GAP = 120; // between layers, room for the edge labels
const PAD = { left: 46, top: 34, right: 24, bottom: 18 };
const CHAR = 7.6; // the width of a character of a node's name, near enough
const LABEL_CHAR = 6.4; // and of an edge label's
const LABEL_MAX = 22; // characters of a condition a label shows

/** labelText is how an edge's condition is shown. */
function labelText(condition) { return `"${short(condition, LABEL_MAX)}"`; }

/**
 * layout places a graph's nodes: layers by the longest path from the start
 * nodes over the edges that do not close a loop (found depth first), and
 * in each layer an order that follows the layer before.
 */
function layout(graph) {
  const names = Object.keys(graph.nodes).sort();
  const edges = [];
  for (const n of names) {
    for (const [i, e] of (graph.nodes[n].edges || []).entries()) {
      if (typeof e?.target !== 'string' || !(e.target in graph.nodes)) continue;
      edges.push({ source: n, target: e.target, index: i, condition: conditionText(e),
        group: e.activation_group || e.target, activation: e.activation_condition === 'any' ? 'any' : 'all' });
    }
  }
  const targets = new Set(edges.map((e) => e.target));
  const start = graph.default_start_node ? [graph.default_start_node].filter((n) => n in graph.nodes) : names.filter((n) => !targets.has(n));
  const out = new Map(names.map((n) => [n, edges.filter((e) => e.source === n)]));
  // Depth first from the start nodes (then any node not reached): an edge to
  // a node on the path is a loop's way back.
  const seen = new Map(); // name → 'open' | 'done'
  const discovered = [];
  const visit = (n) => {
    seen.set(n, 'open');
    discovered.push(n);
    for (const e of out.get(n)) {
      if (seen.get(e.target) === 'open') e.back = true;
      else if (!seen.has(e.target)) visit(e.target);
    }
    seen.set(n, 'done');
  };
  for (const n of [...start, ...names]) if (!seen.has(n)) visit(n);
  const layer = new Map(names.map((n) => [n, 0]));
  for (let changed = true, rounds = 0; changed && rounds <= names.length; rounds++) {
    changed = false;
    for (const e of edges) {
      if (e.back || e.source === e.target) continue;
      if (layer.get(e.target) < layer.get(e.source) + 1) {
        layer.set(e.target, layer.get(e.source) + 1);
        changed = true;
      }
    }
  }
  const layers = [];
  for (const n of discovered) (layers[layer.get(n)] ||= []).push(n);
  // Order each layer by where its nodes' sources sit in the layers before.
  const row = new Map();
  layers.forEach((ns, li) => {
    if (li > 0) {
      const bary = (n) => {
        const from = edges.filter((e) => e.target === n && !e.back && row.has(e.source)).map((e) => row.get(e.source));
        return from.length ? from.reduce((a, b) => a + b, 0) / from.length : Infinity;
      };
      const keyed = ns.map((n, i) => [bary(n), i, n]);
      keyed.sort((a, b) => (a[0] - b[0]) || (a[1] - b[1]));
      layers[li] = keyed.map((k) => k[2]);
    }
    layers[li].forEach((n, i) => row.set(n, i - (layers[li].length - 1) / 2));
  });
  // Coordinates: a column per layer, each as wide as its widest node, and
  // after it a gap wide enough for the labels of the edges leaving it. A
  // loop on a node needs room above the nodes.
  const width = (n) => Math.min(170, Math.max(64, 26 + CHAR * n.length));
  const gap = (ns) => Math.max(GAP, ...edges.filter((e) => ns.includes(e.source) && !e.back && e.source !== e.target && e.condition !== null)
    .map((e) => labelText(e.condition).length * LABEL_CHAR + 40));
  const top = PAD.top + (edges.some((e) => e.source === e.target) ? 18 : 0);
  const tallest = Math.max(...layers.map((ns) => ns.length));
  const pos = new Map();
  let x = PAD.left;
  let last = GAP;
  for (const ns of layers) {
    const w = Math.max(...ns.map(width));
    for (const n of ns) {
      const nw = width(n);
      const y = top + ((tallest - 1) / 2 + row.get(n)) * ROW;
      pos.set(n, { x: x + (w - nw) / 2, y, w: nw, h: NODE_H });
    }
    last = gap(ns);
    x += w + last;
  }
  return { names, edges, start, pos, width: x - last + PAD.right, bottom: top + (tallest - 1) * ROW + NODE_H };
}

/**
 * GraphView draws a graph and follows a chat's events on it. Each node is
 * waiting (it has not run in this run), running (selected, its turn not
 * ended), done (its turn ended), skipped (the graph completed without it)
 * or stopped (the run ended during its turn).
 */
export class GraphView {
  constructor(graph, colour) {
    this.graph = graph;
    this.colour = colour;
    this.l = layout(graph);
    this.state = new Map(this.l.names.map((n) => [n, 'waiting']));
    this.turns = new Map(this.l.names.map((n) => [n, 0]));
    this.complete = false;
    this.summary = document.createElement('p');
    this.summary.className = 'graph-summary';
    this.svg = this.draw();
    this.root = document.createElement('figure');
    this.root.className = 'graph-view';
    this.root.id = 'graph-view';
    const caption = document.createElement('figcaption');
    caption.append(this.summary);
    this.root.append(this.svg, caption);
    this.paint();
  }

  draw() {
    const { edges, start, pos, names } = this.l;
    // Loops back run under the nodes, one lane each.
    const backs = edges.filter((e) => e.back && e.source !== e.target).length;
    const below = this.l.bottom + 26;
    const height = Math.max(this.l.bottom + 24, backs ? below + (backs - 1) * 20 + 10 : 0) + PAD.bottom;
    const root = svg('svg', { class: 'graph', viewBox: `0 0 ${this.l.width} ${height}`, width: this.l.width, height,
      role: 'img', 'aria-label': `Graph of ${names.length} nodes: ${names.join(', ')}` },
    svg('defs', {},
      svg('marker', { id: 'graph-arrow', viewBox: '0 0 10 10', refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: 'auto-start-reverse' },
        svg('path', { d: 'M0,0 L10,5 L0,10 z', class: 'garrow' }))));
    const edgeLayer = svg('g', { class: 'gedges' });
    const labelLayer = svg('g', { class: 'glabels' });
    let under = 0;
    for (const e of edges) {
      const s = pos.get(e.source);
      const t = pos.get(e.target);
      let d;
      let mid;
      if (e.source === e.target) {
        const cx = s.x + s.w / 2;
        d = `M${cx - 10},${s.y} C${cx - 34},${s.y - 34} ${cx + 34},${s.y - 34} ${cx + 10},${s.y}`;
        mid = { x: cx, y: s.y - 30 };
      } else if (e.back) {
        const yb = below + under++ * 20;
        const sx = s.x + s.w / 2;
        const tx = t.x + t.w * 0.78; // right of the join mark
        const sy = s.y + s.h;
        const ty = t.y + t.h;
        d = `M${sx},${sy} C${sx},${yb} ${tx},${yb} ${tx},${ty}`;
        mid = { x: (sx + tx) / 2, y: (sy + ty + 6 * yb) / 8 };
      } else {
        const sx = s.x + s.w;
        const sy = s.y + s.h / 2;
        const tx = t.x;
        const ty = t.y + t.h / 2;
        const dx = Math.max(30, (tx - sx) / 2);
        d = `M${sx},${sy} C${sx + dx},${sy} ${tx - dx},${ty} ${tx},${ty}`;
        mid = { x: (sx + tx) / 2, y: (sy + ty) / 2 };
      }
      const g = svg('g', { class: 'gedge' + (e.back ? ' back' : ''), 'data-source': e.source, 'data-target': e.target,
        'data-group': e.group, 'data-activation': e.activation },
      svg('title', {}, `${e.source} → ${e.target}${e.condition === null ? ', always' : `, when ${e.source}'s message contains "${e.condition}"`}`),
      svg('path', { d, 'marker-end': 'url(#graph-arrow)' }));
      if (e.condition !== null) g.setAttribute('data-condition', e.condition);
      e.el = g;
      edgeLayer.append(g);
      if (e.condition !== null) {
        const text = labelText(e.condition);
        const w = text.length * LABEL_CHAR + 8;
        labelLayer.append(svg('g', { class: 'glabel', 'data-source': e.source, 'data-target': e.target },
          svg('title', {}, `when ${e.source}'s message contains "${e.condition}"`),
          svg('rect', { x: mid.x - w / 2, y: mid.y - 9, width: w, height: 17, rx: 4 }),
          svg('text', { x: mid.x, y: mid.y + 4, 'text-anchor': 'middle' }, text)));
      }
    }
    const nodeLayer = svg('g', { class: 'gnodes' });
    this.nodes = new Map();
    for (const n of names) {
      const p = pos.get(n);
      const count = svg('text', { class: 'gcount', x: p.x + p.w - 6, y: p.y - 4, 'text-anchor': 'end' });
      const g = svg('g', { class: 'gnode', 'data-node': n, 'data-start': start.includes(n) || null },
        svg('title', {}, n),
        svg('rect', { x: p.x, y: p.y, width: p.w, height: p.h, rx: 8 }),
        svg('circle', { cx: p.x + 12, cy: p.y + p.h / 2, r: 4.5, fill: this.colour(n) }),
        svg('text', { class: 'gname', x: p.x + 22, y: p.y + p.h / 2 + 4.5 }, short(n, 19)),
        count);
      this.nodes.set(n, { g, count, title: g.querySelector('title') });
      nodeLayer.append(g);
      // The join: each activation group of two or more edges into the node
      // waits for all of them, or for any one.
      const groups = new Map();
      for (const e of edges) {
        if (e.target !== n) continue;
        if (!groups.has(e.group)) groups.set(e.group, []);
        groups.get(e.group).push(e);
      }
      let k = 0;
      for (const [group, es] of groups) {
        if (es.length < 2) continue;
        const how = es.some((e) => e.activation === 'any') ? 'any' : 'all';
        const bx = p.x - 12;
        const by = p.y + p.h + 4 + k++ * 15;
        nodeLayer.append(svg('g', { class: 'gjoin ' + how, 'data-node': n, 'data-group': group, 'data-join': how },
          svg('title', {}, `${n} runs when ${how === 'all' ? 'all' : 'any one'} of ${es.map((e) => e.source).join(', ')} ${how === 'all' ? 'have' : 'has'} led to it`),
          svg('rect', { x: bx, y: by, width: 54, height: 14, rx: 7 }),
          svg('text', { x: bx + 27, y: by + 10.5, 'text-anchor': 'middle' }, `join: ${how}`)));
      }
      if (start.includes(n)) {
        nodeLayer.append(svg('g', { class: 'gstart', 'data-node': n },
          svg('title', {}, `${n} is where the graph starts`),
          svg('circle', { cx: p.x - 34, cy: p.y + p.h / 2, r: 5 }),
          svg('path', { d: `M${p.x - 29},${p.y + p.h / 2} L${p.x - 2},${p.y + p.h / 2}`, 'marker-end': 'url(#graph-arrow)' }),
          svg('text', { x: p.x - 34, y: p.y - 2, 'text-anchor': 'middle' }, 'start')));
      }
    }
    root.append(edgeLayer, nodeLayer, labelLayer);
    return root;
  }

  /** selected follows a speaker.selected event: the step before it is over, its agents run. */
  selected(d) {
    if (d.method !== 'graph') return;
    for (const [n, s] of this.state) if (s === 'running') this.state.set(n, 'done');
    for (const n of d.agents?.length ? d.agents : [d.agent]) {
      if (!this.state.has(n)) continue;
      this.state.set(n, 'running');
      this.turns.set(n, this.turns.get(n) + 1);
    }
    this.paint();
  }

  /**
   * message follows a message: one of a running node that holds no tool
   * calls and is not a tool result ends that node's turn, and the edges
   * leaving it are taken where its text meets their condition.
   */
  message(m) {
    if (this.state.get(m.name) !== 'running' || m.tool_calls?.length || m.role === 'tool') return;
    this.state.set(m.name, 'done');
    for (const e of this.l.edges) {
      if (e.source !== m.name) continue;
      const taken = e.condition === null || (m.content || '').includes(e.condition);
      e.el.setAttribute('data-taken', taken ? 'yes' : 'no');
    }
    this.paint();
  }

  /** ended follows the end of a run: a complete graph has nothing left to run. */
  ended(d) {
    this.complete = d.stop_reason === 'graph_complete';
    for (const [n, s] of this.state) {
      if (s === 'running') this.state.set(n, this.complete ? 'done' : 'stopped');
      else if (s === 'waiting' && this.complete) this.state.set(n, 'skipped');
    }
    this.paint();
  }

  /** runStarted follows a new run: a graph that completed starts again; one that was cut goes on. */
  runStarted() {
    for (const [n, s] of this.state) {
      if (this.complete || s !== 'done') this.state.set(n, 'waiting');
      if (this.complete) this.turns.set(n, 0);
    }
    if (this.complete) for (const e of this.l.edges) e.el.removeAttribute('data-taken');
    this.complete = false;
    this.paint();
  }

  paint() {
    const by = { running: [], done: [], waiting: [], skipped: [], stopped: [] };
    for (const [n, s] of this.state) {
      by[s].push(n);
      const node = this.nodes.get(n);
      node.g.setAttribute('data-state', s);
      const turns = this.turns.get(n);
      node.count.textContent = turns > 1 ? `×${turns}` : '';
      node.title.textContent = `${n}: ${s}${turns ? `, ${turns} turn${turns === 1 ? '' : 's'} in this run` : ''}`;
    }
    this.root?.setAttribute('data-complete', this.complete ? 'yes' : 'no');
    const part = (state, label) => {
      const span = document.createElement('span');
      span.className = 'gs ' + state;
      span.dataset.state = state;
      span.dataset.nodes = by[state].join(',');
      span.textContent = `${label}: ${by[state].join(', ')}`;
      return by[state].length ? span : null;
    };
    const head = document.createElement('strong');
    head.textContent = this.complete ? 'Graph complete' : 'Graph';
    this.summary.replaceChildren(head, ...[part('running', 'running'), part('done', 'done'), part('waiting', 'waiting'),
      part('stopped', 'cut'), part('skipped', 'not reached')].filter(Boolean));
  }
}
