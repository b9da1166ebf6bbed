// agentd's web console: the chat list, one chat's live transcript across
// its runs, human input and approvals, run again, stop, cancel, fork, and
// new chats. Plain DOM, no framework; model output is only ever inserted as
// text, never as HTML.
import { APIError, apiKey, onUnauthorized, request, setAPIKey, streamEvents } from './api.js';
import { GraphView, graphOf } from './graph.js';
import { layout, lineOf } from './pointer.js';

const $ = (sel, root = document) => root.querySelector(sel);
const terminal = new Set(['completed', 'failed', 'cancelled']);
const terminalEvents = new Set(['chat.completed', 'chat.failed', 'chat.cancelled']);

/** el builds an element: el('div', {class: 'x'}, 'text', child, …). */
function el(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'class') e.className = v;
    else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else if (k === 'style') e.style.cssText = v;
    else e.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

function template(id) { return document.getElementById(id).content.cloneNode(true); }

/** agentColour gives each speaker a stable colour of its own. */
function agentColour(name) {
  if (!name || name === 'user') return '#6b6b70';
  let h = 0;
  for (const ch of name) h = (h * 31 + ch.codePointAt(0)) >>> 0;
  return `hsl(${(h * 137) % 360} 62% 38%)`;
}

function time(s) { return s ? new Date(s).toLocaleTimeString() : ''; }
function pretty(text) {
  try { return JSON.stringify(JSON.parse(text), null, 2); } catch { return text; }
}

// ---------- API key ----------

const keyDialog = $('#key-dialog');
const keyButton = $('#key-button');
function askForKey(message) {
  keyButton.hidden = false;
  $('#key-error').hidden = !message;
  $('#key-error').textContent = message || '';
  if (!keyDialog.open) keyDialog.showModal();
  $('#key-input').focus();
}
onUnauthorized((err) => askForKey(apiKey() ? 'The key was not accepted: ' + err.message : ''));
keyButton.addEventListener('click', () => askForKey(''));
$('#key-form').addEventListener('submit', async (e) => {
  e.preventDefault();
  const previous = apiKey();
  setAPIKey($('#key-input').value.trim());
  try {
    await request('GET', '/v1/chats?limit=1');
  } catch (err) {
    if (err instanceof APIError && err.status === 401) {
      setAPIKey(previous);
      $('#key-error').hidden = false;
      $('#key-error').textContent = 'The key was not accepted.';
      return;
    }
  }
  $('#key-input').value = '';
  keyDialog.close();
  keyButton.hidden = false;
  list.reset();
  route();
});

// ---------- chat list ----------

const list = {
  status: '',
  meta: [], // [[key, value], …]: metadata filters, all of which must hold
  items: new Map(), // id → chat
  order: [],
  next: null,
  pageSize: 25,
  timer: null,

  query(cursor) {
    const q = new URLSearchParams({ limit: String(this.pageSize) });
    if (this.status) q.set('status', this.status);
    for (const [k, v] of this.meta) q.append('metadata.' + k, v);
    if (cursor) q.set('cursor', cursor);
    return '/v1/chats?' + q;
  },

  reset() {
    this.items.clear();
    this.order = [];
    this.next = null;
    this.refresh();
  },

  /** refresh reloads the first page and merges it: new chats appear on top. */
  async refresh() {
    let page;
    try {
      page = await request('GET', this.query());
    } catch (err) {
      this.showError(err);
      return;
    }
    this.showError(null);
    const ids = page.chats.map((c) => c.id);
    const firstLoad = this.order.length === 0;
    const oldest = page.chats.at(-1)?.created_at;
    for (const c of page.chats) this.items.set(c.id, c);
    const rest = this.order.filter((id) => {
      if (ids.includes(id)) return false;
      // Newer than the page's oldest but not in it: it no longer matches
      // the filter.
      const c = this.items.get(id);
      return !(oldest && c && c.created_at > oldest && (this.status || this.meta.length));
    });
    this.order = [...ids, ...rest];
    if (firstLoad) this.next = page.next_cursor;
    this.render();
  },

  async more() {
    if (!this.next) return;
    try {
      const page = await request('GET', this.query(this.next));
      for (const c of page.chats) {
        if (!this.items.has(c.id)) this.order.push(c.id);
        this.items.set(c.id, c);
      }
      this.next = page.next_cursor;
      this.render();
    } catch (err) {
      this.showError(err);
    }
  },

  showError(err) {
    const p = $('#list-error');
    p.hidden = !err || (err instanceof APIError && err.status === 401);
    p.textContent = err ? 'Could not load chats: ' + err.message : '';
  },

  render() {
    const ul = $('#chat-list');
    const current = currentChatID();
    ul.replaceChildren(...this.order.map((id) => {
      const c = this.items.get(id);
      return el('li', { 'data-id': c.id, 'data-status': c.status },
        el('a', { href: '#/chats/' + c.id, class: c.id === current ? 'current' : '' },
          el('div', { class: 'title' },
            el('span', { class: 'name' }, c.name || c.id.slice(0, 8)),
            el('span', { class: 'status ' + c.status }, c.status)),
          el('div', { class: 'sub' }, `${time(c.created_at)} · ${c.run > 1 ? `run ${c.run} · ` : ''}${c.turns} turns · ${c.id.slice(0, 8)}`),
          c.metadata && Object.keys(c.metadata).length ? el('div', { class: 'meta' }, metaText(c.metadata)) : null));
    }));
    $('#more').hidden = !this.next;
  },

  start() {
    this.refresh();
    // The API has no stream of the list: poll the first page while the
    // page is visible.
    this.timer = setInterval(() => { if (!document.hidden) this.refresh(); }, 2000);
  },
};
$('#status-filter').addEventListener('change', (e) => { list.status = e.target.value; list.reset(); });
$('#meta-form').addEventListener('submit', (e) => { e.preventDefault(); applyMetaFilter(); });
$('#meta-filter').addEventListener('change', () => applyMetaFilter());

/** parseMeta reads "key=value, key2=value2" into pairs, or throws what is wrong. */
function parseMeta(text) {
  const pairs = [];
  for (const part of text.split(',')) {
    const s = part.trim();
    if (!s) continue;
    const eq = s.indexOf('=');
    if (eq <= 0) throw new Error(`"${s}" is not key=value`);
    pairs.push([s.slice(0, eq).trim(), s.slice(eq + 1).trim()]);
  }
  return pairs;
}

function applyMetaFilter() {
  const err = $('#meta-error');
  let pairs;
  try {
    pairs = parseMeta($('#meta-filter').value);
  } catch (e) {
    err.hidden = false;
    err.textContent = e.message;
    return;
  }
  err.hidden = true;
  if (JSON.stringify(pairs) === JSON.stringify(list.meta)) return;
  list.meta = pairs;
  list.reset();
}

function metaText(m) {
  return Object.entries(m).map(([k, v]) => `${k}=${typeof v === 'string' ? v : JSON.stringify(v)}`).join(' · ');
}

/** contextText is a context.updated event in words: what it set and removed, and who did. */
function contextText(d) {
  const parts = [];
  if (d.set && Object.keys(d.set).length) parts.push('set ' + metaText(d.set));
  if (d.removed && d.removed.length) parts.push('removed ' + d.removed.join(', '));
  const by = d.by || {};
  const who = by.agent || by.tool ? [by.agent, by.tool].filter(Boolean).join(' via ') : by.client;
  return `Variables ${parts.join('; ') || 'unchanged'}${who ? ` (by ${who})` : ''}.`;
}
$('#more').addEventListener('click', () => list.more());

// ---------- routing ----------

let view = null; // the open chat view, if any

function currentChatID() {
  const m = /^#\/chats\/([^/]+)$/.exec(location.hash);
  return m ? decodeURIComponent(m[1]) : null;
}

function route() {
  if (view) { view.close(); view = null; }
  const main = $('#main');
  const id = currentChatID();
  if (id) {
    view = new ChatView(id);
    main.replaceChildren(view.root);
    view.open();
  } else if (location.hash === '#/new') {
    main.replaceChildren(newChatView());
  } else if (location.hash === '#/teams') {
    main.replaceChildren(teamsView());
  } else {
    main.replaceChildren(template('tpl-welcome'));
  }
  list.render();
}
window.addEventListener('hashchange', route);

// ---------- new chat ----------

let examplesCache = null;
async function loadExamples() {
  if (!examplesCache) {
    const resp = await fetch('/console/examples.json', { cache: 'no-cache' });
    examplesCache = resp.ok ? await resp.json() : {};
  }
  return examplesCache;
}

function newChatView() {
  const frag = template('tpl-new');
  const root = frag.firstElementChild;
  const select = $('#example', root);
  const spec = $('#spec', root);
  const problemBox = $('#create-error', root);
  loadExamples().then((ex) => {
    for (const name of Object.keys(ex).sort()) select.append(el('option', { value: name }, name));
  });
  select.addEventListener('change', async () => {
    const ex = await loadExamples();
    if (ex[select.value]) spec.value = JSON.stringify(ex[select.value], null, 2);
    problemBox.hidden = true;
  });
  $('#create', root).addEventListener('click', async (e) => {
    const button = e.currentTarget;
    button.disabled = true;
    problemBox.hidden = true;
    try {
      const c = await request('POST', '/v1/chats', spec.value);
      list.refresh();
      location.hash = '#/chats/' + c.id;
    } catch (err) {
      showProblem(problemBox, err, spec.value);
    } finally {
      button.disabled = false;
    }
  });
  return root;
}

/** showProblem shows an API error; validation problems appear at the line their JSON pointer names. */
function showProblem(box, err, bodyText) {
  box.hidden = false;
  const p = err.problem;
  box.replaceChildren(el('strong', {}, p ? `${p.status} ${p.title}: ${p.detail}` : String(err.message)));
  const problems = p?.errors || [];
  if (problems.length === 0) return;
  let doc;
  try { doc = JSON.parse(bodyText); } catch { doc = undefined; }
  if (doc === undefined) {
    box.append(el('ul', { class: 'problem-list' }, problems.map((x) => el('li', { 'data-path': x.path }, el('code', {}, x.path), ' ', x.message))));
    box.scrollIntoView({ block: 'start' });
    return;
  }
  const { lines, at } = layout(doc);
  const byLine = new Map();
  for (const x of problems) {
    const n = lineOf(at, x.path);
    if (!byLine.has(n)) byLine.set(n, []);
    byLine.get(n).push(x);
  }
  const pre = el('pre', { class: 'annotated' });
  const marks = new Map(); // problem → its mark in the spec
  lines.forEach((line, i) => {
    pre.append(el('span', { class: 'line', 'data-line': i }, line + '\n'));
    for (const x of byLine.get(i) || []) {
      const indent = line.length - line.trimStart().length;
      const mark = el('span', { class: 'at', 'data-path': x.path },
        ' '.repeat(indent) + `↑ ${x.path || '/'}: ${x.message}\n`);
      marks.set(x, mark);
      pre.append(mark);
    }
  });
  // Every problem first, in the order of the answer: a long spec puts the
  // marks far below, and each entry jumps to its own.
  const jump = (x) => {
    const mark = marks.get(x);
    for (const m of pre.querySelectorAll('.at.flash')) m.classList.remove('flash');
    mark.classList.add('flash');
    mark.scrollIntoView({ block: 'center' });
  };
  box.append(el('ul', { class: 'problem-list' }, problems.map((x) => el('li', {},
    el('button', { type: 'button', class: 'link', 'data-path': x.path, onclick: () => jump(x) },
      el('code', {}, x.path || '/'), ' ', x.message)))), pre);
  box.scrollIntoView({ block: 'start' });
}

// ---------- saved teams ----------

function teamsView() {
  const root = template('tpl-teams').firstElementChild;
  const rows = $('#team-rows', root);
  const more = $('#teams-more', root);
  let next = null;
  const load = async (cursor) => {
    const q = new URLSearchParams({ limit: '50', include: 'spec' });
    if (cursor) q.set('cursor', cursor);
    try {
      const page = await request('GET', '/v1/teams?' + q);
      for (const t of page.teams) {
        const agents = (t.spec?.agents || []).map((a) => a.name).join(', ');
        rows.append(el('tr', { 'data-team': t.name, 'data-version': t.version },
          el('td', {}, el('strong', {}, t.name)),
          el('td', {}, String(t.version)),
          el('td', {}, new Date(t.created_at).toLocaleString()),
          el('td', {}, agents, el('details', {}, el('summary', {}, 'spec'), el('pre', {}, JSON.stringify(t.spec, null, 2))))));
      }
      next = page.next_cursor;
      more.hidden = !next;
      $('#teams-empty', root).hidden = rows.children.length > 0;
    } catch (err) {
      const p = $('#teams-error', root);
      p.hidden = false;
      p.textContent = 'Could not load teams: ' + err.message;
    }
  };
  more.addEventListener('click', () => load(next));
  load(null);
  return root;
}

// ---------- one chat ----------

/**
 * fieldProblems shows validation problems at the fields they name:
 * targetFor(path) gives the element a problem belongs under (or null), and
 * the rest go to box with the answer's heading. Earlier problems in scope
 * are removed first.
 */
function fieldProblems(scope, box, err, targetFor) {
  for (const old of scope.querySelectorAll('.field-problem')) old.remove();
  box.replaceChildren();
  box.hidden = true;
  if (!err) return;
  const p = err.problem;
  const problems = p?.errors || err.errors || [];
  const rest = [];
  for (const x of problems) {
    const at = targetFor(x.path || '');
    if (at) at.after(el('p', { class: 'field-problem', 'data-path': x.path }, `${x.path || '/'}: ${x.message}`));
    else rest.push(x);
  }
  box.hidden = false;
  box.append(el('strong', {}, p ? `${p.status} ${p.title}: ${p.detail}` : String(err.message)));
  if (rest.length) box.append(el('ul', {}, rest.map((x) => el('li', { 'data-path': x.path }, el('code', {}, x.path || '/'), ' ', x.message))));
}

/** LocalProblems is a check the console makes before it sends: problems as the API would list them. */
class LocalProblems extends Error {
  constructor(errors) {
    super(`${errors.length} problem(s) to fix first`);
    this.errors = errors;
  }
}

/**
 * runFields are the inputs of a run (POST /runs, or a fork's first run):
 * the task, for a Swarm the agent to hand it back to (a HandoffMessage),
 * and the run's max_round.
 */
function runFields(spec, taskLabel) {
  const swarm = spec?.speaker_selection?.method === 'swarm';
  const task = el('textarea', { class: 'run-task', rows: 2, spellcheck: 'false', 'aria-label': taskLabel,
    placeholder: 'The task (empty: the team goes on without a new message)' });
  const target = swarm ? el('select', { class: 'run-target', 'aria-label': 'Hand the Swarm back to' },
    el('option', { value: '' }, 'a message from user'),
    (spec.agents || []).map((a) => el('option', { value: a.name }, `a handoff back to ${a.name}`))) : null;
  const maxRound = el('input', { type: 'number', class: 'run-max-round', min: 1, step: 1, placeholder: String(spec?.max_round ?? ''),
    'aria-label': 'max_round of the run' });
  const root = el('div', { class: 'run-fields' },
    task,
    el('div', { class: 'row-inline' },
      target ? el('label', {}, 'As ', target) : null,
      el('label', {}, 'max_round ', maxRound)));
  return {
    root,
    /** value is the run's fields as the API takes them ({} for a run that only goes on). */
    value() {
      const body = {};
      const text = task.value;
      if (target?.value) body.task = { type: 'HandoffMessage', source: 'user', target: target.value, content: text };
      else if (text.trim() !== '') body.task = text;
      if (maxRound.value !== '') body.max_round = Number(maxRound.value);
      return body;
    },
    clear() { task.value = ''; maxRound.value = ''; if (target) target.value = ''; },
    /** targetFor is the field a problem at path (relative to the run) belongs under. */
    targetFor(path) {
      if (path === '/task/target' && target) return target.closest('label');
      if (path === '/task' || path.startsWith('/task/')) return task;
      if (path === '/max_round') return maxRound.closest('label');
      return null;
    },
  };
}

class ChatView {
  constructor(id) {
    this.id = id;
    this.root = template('tpl-chat').firstElementChild;
    this.root.dataset.chat = id; // which chat the view shows: a check of the page can wait for it
    this.transcript = $('#transcript', this.root);
    this.last = 0; // the seq of the last event shown
    this.drafts = new Map(); // agent → draft message element
    this.abort = new AbortController();
    this.refreshTimer = null;
    this.chat = null; // the chat as the API last answered it
    this.spec = null;
    this.issued = 0; // requests for the chat issued …
    this.applied = 0; // … and the latest one whose answer is shown
    this.writing = 0; // requests that change the chat, under way
    // What the events shown so far say, for when they are newer than the
    // chat object: the status and run, and the last run's end.
    this.stream = { status: 'queued', run: 1, end: null };
    this.runSep = null; // the separator of the run whose task is arriving
    this.openMsg = null; // the last message, while it is unknown whether it ended its turn
    this.held = new Map(); // tool_call_id → name, of the calls last held for approval
    this.stopping = 0; // the run a Stop was sent for
    this.graph = null; // the drawing of a graph chat's graph
    // The parallel step under way (a graph's nodes that run at once): the
    // seq of its speaker.selected, its turn and its agents.
    this.step = null;
    this.cancelling = 0; // the run a Cancel was sent for
    $('#cancel', this.root).addEventListener('click', () => this.cancel());
    $('#stop', this.root).addEventListener('click', () => this.stop());
    $('#fork', this.root).addEventListener('click', () => this.openFork(null, null, "the chat's end"));
    $('#erase', this.root).addEventListener('click', () => this.erase());
  }

  async open() {
    await this.refresh(true);
    const graph = graphOf(this.spec);
    if (graph) {
      this.graph = new GraphView(graph, agentColour);
      $('#graph-slot', this.root).replaceChildren(this.graph.root);
    }
    this.buildRunForm();
    this.render();
    const signal = this.abort.signal;
    // From the start of the log, following the chat across its runs: SSE
    // replays every event, then follows. Ids already shown are skipped, so
    // a reconnect can never double one.
    streamEvents(this.id, 0, (ev) => this.onEvent(ev), {
      signal, follow: true,
      onState: (s) => {
        // The label is the open view's: a closed view's stream says nothing.
        if (signal.aborted) return;
        $('#connection').textContent = s === 'live' ? '● live' : s === 'reconnecting' ? 'reconnecting…' : '';
      },
    }).catch((err) => this.showError(err));
  }

  close() {
    this.abort.abort();
    clearTimeout(this.refreshTimer);
    $('#connection').textContent = '';
  }

  get path() { return `/v1/chats/${encodeURIComponent(this.id)}`; }

  showError(err) {
    const p = $('#chat-error', this.root);
    p.hidden = !err;
    p.textContent = err ? String(err.message) : '';
  }

  /**
   * chatRequest sends a request whose answer is the chat, and shows that
   * answer unless the answer of a request issued later is shown already.
   */
  async chatRequest(method, path, body) {
    const n = ++this.issued;
    const write = method !== 'GET';
    // A read issued while a write is under way may be answered from
    // before the write took effect, whichever answer comes back first.
    const stale = !write && this.writing > 0;
    if (write) this.writing++;
    let c;
    try {
      c = await request(method, path, body);
    } finally {
      if (write) this.writing--;
    }
    if (n > this.applied && c?.id === this.id) {
      this.applied = n;
      this.chat = c;
      if (c.spec) this.spec = c.spec;
      list.items.set(c.id, c);
      list.render();
      this.render();
      // It is shown for now, over the write's answer if that came first:
      // read again, now that the write has taken effect.
      if (stale) this.scheduleRefresh();
    } else if (write && c?.id === this.id) {
      // A read issued while this write was under way came back first and
      // may predate the write: read again, now that it has taken effect.
      this.scheduleRefresh();
    }
    return c;
  }

  async refresh(withSpec = false) {
    try {
      await this.chatRequest('GET', this.path + (withSpec ? '?include=spec' : ''));
    } catch (err) {
      this.showError(err);
    }
  }

  scheduleRefresh() {
    clearTimeout(this.refreshTimer);
    this.refreshTimer = setTimeout(() => this.refresh(), 250);
  }

  /**
   * state is the chat as it stands: the chat object when it is as new as
   * the events shown, else what those events say.
   */
  state() {
    const c = this.chat;
    if (c && c.last_seq >= this.last) {
      return {
        status: c.status, run: c.run, queued: c.queued_runs,
        end: terminal.has(c.status) ? { run: c.run, status: c.status, stop_reason: c.stop_reason, stop_detail: c.stop_detail, error: c.error } : null,
      };
    }
    return { ...this.stream, queued: c?.queued_runs ?? 0, end: terminal.has(this.stream.status) ? this.stream.end : null };
  }

  /** render shows the head, the end and the run form as the chat stands: only what can be done is offered. */
  render() {
    const c = this.chat;
    if (!c) return;
    const s = this.state();
    const ended = terminal.has(s.status);
    $('#chat-name', this.root).textContent = c.name || c.id;
    const st = $('#chat-status', this.root);
    st.textContent = s.status;
    st.className = 'status ' + s.status;
    // A run is active: it can be stopped after its turn, or cancelled now.
    const stop = $('#stop', this.root);
    stop.hidden = ended;
    stop.disabled = this.stopping === s.run;
    stop.textContent = this.stopping === s.run ? 'Stopping after this turn…' : 'Stop';
    const cancel = $('#cancel', this.root);
    cancel.hidden = ended;
    cancel.disabled = this.cancelling === s.run;
    // An ended chat can be forked from its end, and erased.
    $('#fork', this.root).hidden = !ended;
    $('#erase', this.root).hidden = !ended;
    const u = c.usage || {};
    const src = c.forked_from;
    $('#chat-facts', this.root).replaceChildren(...[
      el('span', {}, `id ${c.id}`),
      el('span', { 'data-fact': 'run' }, `run ${s.run}`),
      s.queued > 0 ? el('span', { 'data-fact': 'queued_runs' }, `${s.queued} queued run${s.queued === 1 ? '' : 's'}`) : null,
      src ? el('span', { 'data-fact': 'forked_from' }, 'forked from ',
        el('a', { href: '#/chats/' + encodeURIComponent(src.chat_id), 'data-chat': src.chat_id }, src.chat_id.slice(0, 8)), ` at #${src.seq}`) : null,
      el('span', { 'data-fact': 'turns' }, `${c.turns} turns`),
      el('span', { 'data-fact': 'messages' }, `${c.message_count} messages`),
      el('span', { 'data-fact': 'usage' }, `${u.prompt_tokens ?? 0} prompt + ${u.completion_tokens ?? 0} completion tokens`),
      el('span', {}, `created ${new Date(c.created_at).toLocaleString()}`),
      c.team ? el('span', { 'data-fact': 'team' }, `team ${c.team.name}@${c.team.version}`) : null,
      c.metadata && Object.keys(c.metadata).length ? el('span', { 'data-fact': 'metadata' }, `metadata ${metaText(c.metadata)}`) : null,
      c.context_variables && Object.keys(c.context_variables).length
        ? el('span', { 'data-fact': 'context_variables' }, `variables ${metaText(c.context_variables)}`) : null,
    ].filter(Boolean));
    this.showEnd(s.end);
    this.renderRunForm(!ended || s.queued > 0);
  }

  onEvent(ev) {
    if (ev.id !== undefined) {
      if (ev.id <= this.last) return; // already shown
      this.last = ev.id;
      // Anything after an input request means it was answered.
      if (ev.event !== 'input.requested') this.hideInput();
      this.settleTurn(ev);
    }
    const d = ev.data || {};
    switch (ev.event) {
      case 'chat.created':
        this.note(ev, 'Chat created.');
        break;
      case 'run.started':
        this.runStarted(ev, d);
        break;
      case 'chat.running':
        this.taskDone();
        this.stream.status = 'running';
        this.running(ev, d);
        break;
      case 'speaker.selected':
        this.taskDone();
        this.stream.status = 'running';
        this.speakerSelected(ev, d);
        break;
      case 'message':
        this.dropDraft(d.name);
        this.transcript.append(this.branch(this.message(ev, d), d.name));
        this.graph?.message(d);
        if (this.runSep) this.addTask(d);
        this.openMsg = this.transcript.lastElementChild;
        break;
      case 'message.delta':
        this.delta(d);
        break;
      case 'input.requested':
        this.stream.status = 'awaiting_input';
        this.inputRequested(ev, d);
        this.showInput(d);
        break;
      case 'context.updated':
        this.note(ev, contextText(d)).classList.add('context-change');
        break;
      default:
        if (terminalEvents.has(ev.event)) {
          for (const name of [...this.drafts.keys()]) this.dropDraft(name);
          this.taskDone();
          this.step = null;
          this.graph?.ended(d);
          this.stream.status = d.status;
          if (d.run) this.stream.run = d.run;
          this.stream.end = d;
          this.runEnd(ev, d);
        } else {
          this.note(ev, ev.event);
        }
    }
    if (ev.id !== undefined) {
      this.render();
      this.scheduleRefresh();
    }
    this.follow();
  }

  /**
   * follow keeps the newest event in view while the reader is at the
   * bottom. The main pane scrolls, never the window: the bar, the chat's
   * head and the list stay where they are.
   */
  follow() {
    const pane = $('#main');
    const nearBottom = pane.scrollTop + pane.clientHeight >= pane.scrollHeight - 160;
    if (nearBottom) pane.scrollTop = pane.scrollHeight;
  }

  note(ev, text, ...extra) {
    const li = el('li', { class: 'ev-note', 'data-seq': ev.id, 'data-event': ev.event }, text, ...extra);
    this.transcript.append(li);
    return li;
  }

  /**
   * settleTurn decides, from the event after it, whether the last message
   * ended its agent's turn: then the chat can be forked there. A message or
   * a selection follows a message that ended its turn; more messages follow
   * one inside a turn (tool calls, their results); input requests and
   * resumptions leave it open. A cancel or a failure may have cut the turn,
   * so only the run's end is offered then.
   */
  settleTurn(ev) {
    const m = this.openMsg;
    if (!m) return;
    switch (ev.event) {
      case 'speaker.selected': case 'run.started': case 'chat.completed':
        this.offerFork(m, `after #${m.dataset.seq}, ${m.dataset.name}'s message`);
        this.openMsg = null;
        break;
      case 'message': case 'chat.cancelled': case 'chat.failed':
        this.openMsg = null;
        break;
      default: // chat.running, input.requested: the turn may go on
    }
  }

  offerFork(li, what) {
    const at = Number(li.dataset.seq);
    const button = el('button', { type: 'button', class: 'link fork-here', 'data-fork-seq': at, title: `A new chat from this one's log up to #${at}`,
      onclick: () => this.openFork(at, li, what) }, 'Fork here');
    const slot = li.querySelector(':scope > .who') || li;
    slot.append(button);
  }

  runStarted(ev, d) {
    this.stream = { status: 'queued', run: d.run, end: null };
    this.step = null;
    this.graph?.runStarted();
    this.runSep = el('li', { class: 'run-sep', 'data-seq': ev.id, 'data-event': ev.event, 'data-run': d.run },
      el('span', { class: 'run-label' }, `Run ${d.run}`),
      d.max_round ? el('span', { class: 'run-meta' }, `max_round ${d.max_round}`) : null,
      el('span', { class: 'run-task' }));
    this.transcript.append(this.runSep);
  }

  /** addTask shows a task message of the run that is starting in its separator. */
  addTask(m) {
    const t = $('.run-task', this.runSep);
    const line = (m.content || '').split('\n')[0];
    const text = (line.length > 160 ? line.slice(0, 160) + '…' : line) || (m.content ? '…' : '');
    t.append(t.childNodes.length ? ' · ' : '', m.handoff ? `→ ${m.handoff}: ${text}` : text);
  }

  /** taskDone closes the separator of a run whose task has arrived. */
  taskDone() {
    const sep = this.runSep;
    if (!sep) return;
    this.runSep = null;
    const t = $('.run-task', sep);
    if (!t.childNodes.length) {
      t.classList.add('muted');
      t.textContent = 'no new task: the team goes on';
    }
  }

  runEnd(ev, d) {
    const label = d.run ? `Run ${d.run}` : 'The chat';
    const li = el('li', { class: 'run-end ' + d.status, 'data-seq': ev.id, 'data-event': ev.event, 'data-run': d.run, 'data-stop-reason': d.stop_reason },
      el('span', {}, el('strong', {}, `${label} ${d.status}`), `: ${d.stop_reason}`,
        d.stop_detail ? el('span', { class: 'detail' }, ` — ${d.stop_detail}`) : null,
        d.error ? el('span', { class: 'error' }, ` ${d.error}`) : null));
    this.transcript.append(li);
    this.offerFork(li, `the end of ${label.toLowerCase()}`);
  }

  running(ev, d) {
    if (!d.approvals?.length) {
      this.note(ev, 'Running.');
      return;
    }
    const said = d.approvals.map((a) => {
      const what = a.tool_call_id ? (this.held.get(a.tool_call_id) || a.tool_call_id) : 'the code';
      if (!a.approve) return `rejected ${what}${a.reason ? ` (${a.reason})` : ''}`;
      return `approved ${what}${a.arguments ? ' with edited arguments' : ''}`;
    });
    this.note(ev, `Running: ${said.join(', ')}.`);
  }

  inputRequested(ev, d) {
    let text;
    if (d.kind === 'speaker') text = `Waiting for the next speaker to be picked: ${d.reason || ''}`;
    else if (d.kind === 'approval') {
      this.held = new Map((d.tool_calls || []).map((tc) => [tc.id, tc.function?.name]));
      text = d.tool_calls?.length
        ? `Waiting for approval of ${d.agent}'s calls: ${d.tool_calls.map((tc) => tc.function?.name).join(', ')}`
        : `Waiting for approval of ${d.agent}'s code (${(d.code_blocks || []).length} block(s))`;
    } else text = `Waiting for ${d.agent || 'a human'}: ${d.reason || ''}`;
    this.note(ev, text);
  }

  speakerSelected(ev, d) {
    if (d.team) {
      // A turn of a team agent's inner team: it changes nothing of the
      // chat's own steps.
      const li = this.note(ev, '→ ', el('strong', { style: `color:${agentColour(d.agent)}` }, d.agent),
        ` speaks in ${d.team}'s team (${[d.turn ? `turn ${d.turn}` : null, d.method].filter(Boolean).join(', ')})`);
      li.classList.add('inner');
      li.dataset.team = d.team;
      return;
    }
    this.graph?.selected(d);
    this.step = null;
    if (d.agents?.length > 1) {
      // A parallel step: its agents run at once, and their messages (and
      // drafts) are marked as its branches until the next step.
      this.step = { seq: ev.id, turn: d.turn, agents: d.agents };
      const names = d.agents.flatMap((a, i) => [i ? ', ' : '', el('strong', { style: `color:${agentColour(a)}` }, a)]);
      const li = this.note(ev, '→ ', ...names, ` run at once (${[d.turn ? `turn ${d.turn}` : null, d.method].filter(Boolean).join(', ')})`);
      li.classList.add('step-head');
      li.dataset.agents = d.agents.join(',');
      return;
    }
    const bits = [d.method];
    if (d.turn) bits.unshift(`turn ${d.turn}`);
    if (d.routed) bits.push('routed to the executor of the called functions');
    if (d.fallback) bits.push('fallback');
    const extra = [];
    if (d.candidates?.length) extra.push(` · candidates: ${d.candidates.join(', ')}`);
    if (d.replies?.length) {
      extra.push(' ', el('details', {},
        el('summary', {}, `selector: ${d.attempts ?? d.replies.length} attempt(s)`),
        el('ol', {}, d.replies.map((r) => el('li', {}, r)))));
    }
    this.note(ev, '→ ', el('strong', { style: `color:${agentColour(d.agent)}` }, d.agent), ` speaks (${bits.join(', ')})`, ...extra);
  }

  message(ev, m) {
    const kind = m.tool_calls?.length ? 'tool call' : m.role === 'tool' ? 'tool result' : m.code_result ? 'code execution' : m.handoff ? 'handoff'
      : m.structured ? 'structured' : m.parts ? 'text and images' : '';
    const li = el('li', {
      class: m.team ? 'msg inner' : 'msg', 'data-seq': ev.id, 'data-event': 'message', 'data-name': m.name,
      'data-team': m.team || null, style: `--agent:${agentColour(m.name)}`,
    },
    el('div', { class: 'who' },
      el('span', { class: 'name' }, m.name),
      el('span', { class: 'meta' }, [m.role, kind, m.team ? `in ${m.team}'s team` : ''].filter(Boolean).join(' · ')),
      m.usage ? el('span', { class: 'meta', 'data-usage': '' }, `${m.usage.prompt_tokens}+${m.usage.completion_tokens} tokens`) : null,
      el('span', { class: 'seq', title: m.created_at }, `#${m.seq} ${time(m.created_at)}`)));
    // A structured reply without a format string has its object as its
    // content: the table below shows it once.
    // A MultiModalMessage shows its parts; its content is their text only.
    if (m.parts) li.append(...m.parts.map((p, i) => renderPart(p, i)));
    else if (m.content && !(m.structured && m.content.trimStart().startsWith('{'))) li.append(renderContent(m.content));
    if (m.structured) li.append(structuredTable(m.structured));
    for (const tc of m.tool_calls || []) {
      li.append(el('details', { class: 'tool-call' },
        el('summary', {}, '🔧 ', el('code', {}, `${tc.function?.name}(…)`), ` ${tc.id}`),
        el('pre', {}, pretty(tc.function?.arguments ?? ''))));
    }
    for (const tr of m.tool_responses || []) {
      li.append(el('details', { class: tr.is_error ? 'tool-result tool-error' : 'tool-result' },
        el('summary', {}, tr.is_error ? '✗ error for ' : '↩ result for ', el('code', {}, tr.tool_call_id)),
        el('pre', {}, pretty(tr.content))));
    }
    if (m.code_result) {
      li.append(el('details', { class: 'code-result', open: true },
        el('summary', {}, `exit code ${m.code_result.exit_code}`),
        el('pre', {}, m.code_result.output)));
    }
    if (m.handoff) li.append(el('div', { class: 'handoff' }, el('span', { class: 'badge' }, `handoff → ${m.handoff}`)));
    return li;
  }

  /**
   * branch marks an element of the transcript (a message or a draft) of an
   * agent of the parallel step under way as that agent's branch: indented
   * by its place in the step, with a rule in its colour and a tag.
   */
  branch(li, name) {
    const i = this.step ? this.step.agents.indexOf(name) : -1;
    if (i < 0) return li;
    li.classList.add('branch');
    li.dataset.step = this.step.seq;
    li.dataset.branch = name;
    li.style.setProperty('--lane', String(i));
    const tag = el('span', { class: 'branch-tag', title: `${name}'s branch of the parallel step of turn ${this.step.turn}` },
      `∥ branch ${i + 1}/${this.step.agents.length}`);
    $(':scope > .who .name', li)?.after(tag);
    return li;
  }

  delta(d) {
    let draft = this.drafts.get(d.name);
    if (d.reset) {
      // The reply's text so far is void: the model call is retried, another
      // replica took the chat over, or the stream opened during the reply
      // (its text so far follows).
      if (draft) $('.content', draft).textContent = '';
      return;
    }
    if (!draft) {
      draft = el('li', { class: 'msg draft', 'data-draft': d.name, style: `--agent:${agentColour(d.name)}` },
        el('div', { class: 'who' }, el('span', { class: 'name' }, d.name), el('span', { class: 'meta' }, 'writing…')),
        el('div', { class: 'content' }));
      this.drafts.set(d.name, draft);
      this.transcript.append(this.branch(draft, d.name));
    }
    if (d.reset) $('.content', draft).replaceChildren();
    $('.content', draft).append(d.content || '');
  }

  dropDraft(name) {
    const draft = this.drafts.get(name);
    if (draft) { draft.remove(); this.drafts.delete(name); }
  }

  showInput(p) {
    const panel = $('#input-panel', this.root);
    panel.hidden = false;
    panel.dataset.requestId = p.request_id;
    panel.dataset.kind = p.kind;
    if (p.kind === 'approval') {
      this.showApproval(panel, p);
      return;
    }
    const err = el('p', { class: 'error', hidden: true });
    const send = async (body, button) => {
      button.disabled = true;
      try {
        await request('POST', this.path + '/input', { request_id: p.request_id, ...body });
        // The chat may have asked again before this answer's response
        // came: that request's panel stays.
        if (panel.dataset.requestId === p.request_id) panel.replaceChildren(el('p', { class: 'muted' }, 'Sent.'));
      } catch (e) {
        err.hidden = false;
        err.textContent = e.message;
        button.disabled = false;
      }
    };
    if (p.kind === 'speaker') {
      panel.replaceChildren(
        el('strong', {}, 'Pick the next speaker'), el('div', { class: 'muted' }, p.reason || ''),
        el('div', { class: 'candidates' }, (p.candidates || []).map((name) =>
          el('button', { type: 'button', 'data-speaker': name, style: `background:${agentColour(name)};border-color:${agentColour(name)}`,
            onclick: (e) => send({ speaker: name }, e.currentTarget) }, name))),
        err);
    } else {
      const text = el('textarea', { 'aria-label': 'Your message', placeholder: 'Your message (empty: the agent auto-replies; "exit" ends the chat)' });
      panel.replaceChildren(
        el('strong', {}, `${p.agent || 'A human'} is asked for input`), el('div', { class: 'muted' }, p.reason || ''),
        text,
        el('div', { class: 'actions' },
          el('button', { type: 'button', 'data-action': 'send', onclick: (e) => send({ content: text.value }, e.currentTarget) }, 'Send'),
          el('button', { type: 'button', class: 'secondary', 'data-action': 'exit', onclick: (e) => send({ content: 'exit' }, e.currentTarget) }, 'Exit chat')),
        err);
      text.focus();
    }
  }

  /**
   * showApproval asks for a decision on each call held for approval (its
   * arguments pretty-printed and editable as JSON) or on the code about to
   * run, and sends them all in one POST /input.
   */
  showApproval(panel, p) {
    const decision = (i, what) => {
      const name = `decision-${p.request_id}-${i}`;
      const approve = el('input', { type: 'radio', name, value: 'approve', 'aria-label': `Approve ${what}` });
      const reject = el('input', { type: 'radio', name, value: 'reject', 'aria-label': `Reject ${what}` });
      const reason = el('input', { type: 'text', class: 'reason', 'aria-label': `Reason for ${what}`,
        placeholder: 'Reason (optional; a rejected call is answered with it)' });
      const row = el('div', { class: 'decision' },
        el('label', { class: 'approve' }, approve, ' Approve'),
        el('label', { class: 'reject' }, reject, ' Reject'),
        reason);
      return { row, approve, reject, reason };
    };
    const items = [];
    for (const [i, tc] of (p.tool_calls || []).entries()) {
      const name = tc.function?.name ?? '';
      const original = tc.function?.arguments ?? '';
      const shown = pretty(original);
      const args = el('textarea', { class: 'args', spellcheck: 'false', rows: Math.min(12, shown.split('\n').length + 1),
        'aria-label': `Arguments of ${name} (JSON)` });
      args.value = shown;
      const dec = decision(i, name);
      // A rejected call runs with no arguments: nothing to edit.
      const sync = () => { args.disabled = dec.reject.checked; };
      dec.approve.addEventListener('change', sync);
      dec.reject.addEventListener('change', sync);
      const head = el('div', { class: 'call-head' }, '🔧 ', el('code', { class: 'call-name' }, name), ' ', el('span', { class: 'muted' }, tc.id));
      items.push({ id: tc.id, original, args, head, ...dec,
        root: el('div', { class: 'approval', 'data-call-id': tc.id, 'data-index': i }, head, args, dec.row) });
    }
    if (!items.length) {
      const dec = decision(0, 'the code');
      const blocks = (p.code_blocks || []).map((b) => el('pre', { class: 'code' }, el('span', { class: 'lang' }, b.language), el('code', {}, b.code)));
      items.push({ ...dec, root: el('div', { class: 'approval', 'data-code': '', 'data-index': 0 }, blocks, dec.row) });
    }
    const box = el('div', { class: 'problem', hidden: true });
    const sendButton = el('button', { type: 'button', 'data-action': 'send-approvals' }, 'Send decisions');
    const targetFor = (path) => {
      const m = /^\/approvals\/(\d+)(\/[^/]+)?/.exec(path);
      const it = m && items[Number(m[1])];
      if (!it) return null;
      if (m[2] === '/arguments' && it.args) return it.args;
      if (m[2] === '/reason') return it.reason;
      if (m[2] === '/tool_call_id' && it.head) return it.head;
      return it.row;
    };
    const submit = async () => {
      const approvals = [];
      const problems = [];
      items.forEach((it, i) => {
        const a = {};
        if (it.id) a.tool_call_id = it.id;
        if (!it.approve.checked && !it.reject.checked) problems.push({ path: `/approvals/${i}/approve`, message: 'approve or reject' });
        a.approve = it.approve.checked;
        if (it.args && a.approve && it.args.value !== pretty(it.original)) {
          let v;
          try {
            v = JSON.parse(it.args.value);
          } catch (e) {
            problems.push({ path: `/approvals/${i}/arguments`, message: `is not JSON: ${e.message}` });
          }
          if (v !== undefined && (v === null || typeof v !== 'object' || Array.isArray(v))) {
            problems.push({ path: `/approvals/${i}/arguments`, message: 'must be a JSON object' });
          } else if (v !== undefined) {
            a.arguments = v;
          }
        }
        if (it.reason.value.trim()) a.reason = it.reason.value.trim();
        approvals.push(a);
      });
      if (problems.length) {
        fieldProblems(panel, box, new LocalProblems(problems), targetFor);
        return;
      }
      sendButton.disabled = true;
      try {
        await request('POST', this.path + '/input', { request_id: p.request_id, approvals });
        if (panel.dataset.requestId === p.request_id) panel.replaceChildren(el('p', { class: 'muted' }, 'Sent.'));
      } catch (e) {
        fieldProblems(panel, box, e, targetFor);
        sendButton.disabled = false;
      }
    };
    sendButton.addEventListener('click', submit);
    panel.replaceChildren(
      el('strong', {}, p.tool_calls?.length ? `${p.agent}'s calls wait for your approval` : `${p.agent}'s code waits for your approval`),
      el('div', { class: 'muted' }, p.reason || ''),
      ...items.map((it) => it.root),
      el('div', { class: 'actions' }, sendButton),
      box);
  }

  hideInput() {
    const panel = $('#input-panel', this.root);
    panel.hidden = true;
    panel.replaceChildren();
  }

  /** showEnd shows how the latest run ended, or nothing while a run is active. */
  showEnd(d) {
    const box = $('#chat-end', this.root);
    box.hidden = !d;
    if (!d) return;
    box.className = 'chat-end ' + d.status;
    box.replaceChildren(...[
      el('strong', { 'data-stop-reason': d.stop_reason }, `${d.run > 1 ? `run ${d.run} ` : ''}${d.status}: ${d.stop_reason}`),
      d.stop_detail ? el('div', {}, d.stop_detail) : null,
      d.error ? el('div', { class: 'error' }, d.error) : null].filter(Boolean));
  }

  // ----- runs -----

  buildRunForm() {
    const box = $('#run-box', this.root);
    const fields = runFields(this.spec, 'Task of the next run');
    const enqueue = el('input', { type: 'radio', name: 'if_busy', value: 'enqueue', checked: true });
    const interrupt = el('input', { type: 'radio', name: 'if_busy', value: 'interrupt' });
    const busy = el('div', { class: 'if-busy', 'data-field': 'if_busy' }, 'A run is active: ',
      el('label', {}, enqueue, ' queue this one after it'),
      el('label', {}, interrupt, ' interrupt it (it ends cancelled)'));
    const submit = el('button', { type: 'submit', id: 'run-submit' }, 'Run again');
    const posted = el('span', { class: 'muted', id: 'run-posted' });
    const problems = el('div', { class: 'problem', hidden: true });
    // novalidate: the server checks the run and its problems are shown at
    // the fields, as a spec's are.
    const form = el('form', { id: 'run-form', class: 'run-form', novalidate: true },
      el('h2', {}, 'Run again'),
      el('p', { class: 'muted' }, 'The same team goes on with what it has said so far; the termination conditions and the turn count start again.'),
      fields.root, busy,
      el('div', { class: 'actions' }, submit, posted),
      problems);
    const targetFor = (path) => (path === '/if_busy' ? busy : fields.targetFor(path));
    form.addEventListener('submit', async (e) => {
      e.preventDefault();
      const body = fields.value();
      if (!busy.hidden) body.if_busy = interrupt.checked ? 'interrupt' : 'enqueue';
      submit.disabled = true;
      fieldProblems(form, problems, null, targetFor);
      try {
        const c = await this.chatRequest('POST', this.path + '/runs', body);
        fields.clear();
        posted.dataset.run = c.posted_run;
        posted.textContent = `Run ${c.posted_run} posted.`;
      } catch (err) {
        fieldProblems(form, problems, err, targetFor);
        if (err instanceof APIError && err.status === 409) this.refresh();
      } finally {
        submit.disabled = false;
      }
    });
    this.runForm = { busy, submit, interrupt };
    box.replaceChildren(form);
  }

  /** renderRunForm offers if_busy only while a run is active or waits to start. */
  renderRunForm(busy) {
    const f = this.runForm;
    if (!f) return;
    f.busy.hidden = !busy;
    f.submit.textContent = !busy ? 'Run again' : f.interrupt.checked ? 'Interrupt and run' : 'Queue the run';
    if (!f.wired) {
      f.wired = true;
      f.busy.addEventListener('change', () => this.render());
    }
  }

  /**
   * openFork opens the form that forks the chat at seq (null: its end),
   * under anchor (or the head): a new chat from a copy of the log, with an
   * optional first run; on success the fork opens.
   */
  openFork(at, anchor, what) {
    this.root.querySelector('.fork-form')?.remove();
    const fields = runFields(this.spec, 'Task of the fork\'s first run');
    const problems = el('div', { class: 'problem', hidden: true });
    const submit = el('button', { type: 'submit', 'data-action': 'fork' }, 'Fork');
    const close = el('button', { type: 'button', class: 'secondary', onclick: () => form.remove() }, 'Close');
    const inner = [
      el('strong', {}, `Fork from ${what}`),
      el('p', { class: 'muted' }, 'A new chat with a copy of this one\'s log up to there; this chat does not change. With a task, the fork\'s first run starts at once.'),
      fields.root,
      el('div', { class: 'actions' }, submit, close),
      problems];
    const form = anchor
      ? el('li', { class: 'fork-form', 'data-fork-at': at ?? '' }, el('form', { novalidate: true }, ...inner))
      : el('div', { class: 'fork-form', 'data-fork-at': '' }, el('form', { novalidate: true }, ...inner));
    const targetFor = (path) => (path === '/at_seq' ? form.querySelector('strong') : path.startsWith('/run') ? fields.targetFor(path.slice(4)) : null);
    form.querySelector('form').addEventListener('submit', async (e) => {
      e.preventDefault();
      const body = {};
      if (at !== null) body.at_seq = at;
      const run = fields.value();
      if (Object.keys(run).length) body.run = run;
      submit.disabled = true;
      try {
        const c = await request('POST', this.path + '/fork', body);
        list.refresh();
        location.hash = '#/chats/' + c.id;
      } catch (err) {
        fieldProblems(form, problems, err, targetFor);
        submit.disabled = false;
      }
    });
    if (anchor) anchor.after(form);
    else $('#fork-slot', this.root).replaceChildren(form);
    form.querySelector('textarea').focus();
  }

  async stop() {
    const run = this.state().run;
    this.stopping = run;
    this.render();
    try {
      await this.chatRequest('POST', this.path + '/stop', {});
    } catch (err) {
      this.showError(err);
      this.stopping = 0;
      this.render();
    }
  }

  /**
   * erase deletes the chat for good (DELETE /v1/chats/{id}), after a second
   * click on the same button: the confirmation is in the page, not a dialog.
   */
  async erase() {
    const button = $('#erase', this.root);
    if (button.dataset.confirm !== 'yes') {
      button.dataset.confirm = 'yes';
      button.textContent = 'Delete for good?';
      setTimeout(() => { delete button.dataset.confirm; button.textContent = 'Delete'; }, 5000);
      return;
    }
    button.disabled = true;
    try {
      await request('DELETE', this.path);
      list.items.delete(this.id);
      list.order = list.order.filter((id) => id !== this.id);
      list.render();
      location.hash = '#/';
    } catch (err) {
      this.showError(err);
      button.disabled = false;
    }
  }

  async cancel() {
    this.cancelling = this.state().run;
    this.render();
    try {
      await this.chatRequest('POST', this.path + '/cancel', {});
    } catch (err) {
      this.showError(err);
      this.cancelling = 0;
      this.render();
    }
  }
}

/** renderContent shows text with its fenced code blocks as code. */
function renderContent(text) {
  const div = el('div', { class: 'content' });
  const fence = /```([\w+-]*)[^\n]*\n([\s\S]*?)```/g;
  let at = 0;
  for (let m; (m = fence.exec(text)) !== null;) {
    if (m.index > at) div.append(text.slice(at, m.index));
    div.append(el('pre', { class: 'code' }, m[1] ? el('span', { class: 'lang' }, m[1]) : null, el('code', {}, m[2])));
    at = fence.lastIndex;
  }
  if (at < text.length) div.append(text.slice(at));
  return div;
}

/** renderPart shows a part of a MultiModalMessage: a text as any content,
 * an image from its data (size-bounded by the style sheet). */
function renderPart(p, i) {
  if (typeof p === 'string') return renderContent(p);
  const img = p?.image;
  if (!img?.data) return el('div', { class: 'content' }, '<image>');
  const type = /^image\/(png|jpeg|gif)$/.test(img.media_type) ? img.media_type : 'image/png';
  return el('img', { class: 'part-image', 'data-part': String(i), alt: `image ${i + 1}`, src: `data:${type};base64,${img.data}` });
}

/** structuredTable shows a structured reply's object: a row per field,
 * strings as they are and anything else as JSON. */
function structuredTable(obj) {
  const rows = Object.entries(obj && typeof obj === 'object' ? obj : { value: obj }).map(([k, v]) =>
    el('tr', {}, el('th', {}, k), el('td', {}, typeof v === 'string' ? v : JSON.stringify(v))));
  return el('table', { class: 'structured', 'data-structured': '' }, el('tbody', {}, rows));
}

// ---------- start ----------

if (apiKey()) keyButton.hidden = false;
list.start();
route();
