// agentd's web console: the chat list, one chat's live transcript, human
// input, cancel, and new chats. Plain DOM, no framework; model output is
// only ever inserted as text, never as HTML.
import { APIError, apiKey, onUnauthorized, request, setAPIKey, streamEvents } from './api.js';
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
          el('div', { class: 'sub' }, `${time(c.created_at)} · ${c.turns} turns · ${c.id.slice(0, 8)}`),
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
    box.append(el('ul', {}, problems.map((x) => el('li', { 'data-path': x.path }, el('code', {}, x.path), ' ', x.message))));
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
  lines.forEach((line, i) => {
    pre.append(el('span', { class: 'line', 'data-line': i }, line + '\n'));
    for (const x of byLine.get(i) || []) {
      const indent = line.length - line.trimStart().length;
      pre.append(el('span', { class: 'at', 'data-path': x.path },
        ' '.repeat(indent) + `↑ ${x.path || '/'}: ${x.message}\n`));
    }
  });
  box.append(pre);
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

class ChatView {
  constructor(id) {
    this.id = id;
    this.root = template('tpl-chat').firstElementChild;
    this.transcript = $('#transcript', this.root);
    this.last = 0; // the seq of the last event shown
    this.drafts = new Map(); // agent → draft message element
    this.abort = new AbortController();
    this.refreshTimer = null;
    this.ended = false;
    $('#cancel', this.root).addEventListener('click', () => this.cancel());
    $('#erase', this.root).addEventListener('click', () => this.erase());
  }

  async open() {
    await this.refresh();
    const signal = this.abort.signal;
    // From the start of the log: SSE replays every event, then follows.
    // Ids already shown are skipped, so a reconnect can never double one.
    streamEvents(this.id, 0, (ev) => this.onEvent(ev), {
      signal,
      onState: (s) => { $('#connection').textContent = s === 'live' ? '● live' : s === 'reconnecting' ? 'reconnecting…' : ''; },
    }).catch((err) => this.showError(err));
  }

  close() {
    this.abort.abort();
    clearTimeout(this.refreshTimer);
    $('#connection').textContent = '';
  }

  showError(err) {
    const p = $('#chat-error', this.root);
    p.hidden = !err;
    p.textContent = err ? String(err.message) : '';
  }

  async refresh() {
    try {
      const c = await request('GET', `/v1/chats/${encodeURIComponent(this.id)}`);
      this.chat = c;
      this.renderHead(c);
      list.items.set(c.id, c);
      list.render();
    } catch (err) {
      this.showError(err);
    }
  }

  scheduleRefresh() {
    clearTimeout(this.refreshTimer);
    this.refreshTimer = setTimeout(() => this.refresh(), 250);
  }

  renderHead(c) {
    $('#chat-name', this.root).textContent = c.name || c.id;
    const st = $('#chat-status', this.root);
    st.textContent = c.status;
    st.className = 'status ' + c.status;
    // Only what can be done: an ended chat offers no Cancel.
    $('#cancel', this.root).hidden = this.ended || terminal.has(c.status);
    // Only an ended chat can be erased.
    $('#erase', this.root).hidden = !terminal.has(c.status);
    const u = c.usage || {};
    $('#chat-facts', this.root).replaceChildren(...[
      el('span', {}, `id ${c.id}`),
      el('span', { 'data-fact': 'turns' }, `${c.turns} turns`),
      el('span', { 'data-fact': 'messages' }, `${c.message_count} messages`),
      el('span', { 'data-fact': 'usage' }, `${u.prompt_tokens ?? 0} prompt + ${u.completion_tokens ?? 0} completion tokens`),
      el('span', {}, `created ${new Date(c.created_at).toLocaleString()}`),
      c.team ? el('span', { 'data-fact': 'team' }, `team ${c.team.name}@${c.team.version}`) : null,
      c.metadata && Object.keys(c.metadata).length ? el('span', { 'data-fact': 'metadata' }, `metadata ${metaText(c.metadata)}`) : null,
    ].filter(Boolean));
    if (terminal.has(c.status)) this.showEnd({ status: c.status, stop_reason: c.stop_reason, stop_detail: c.stop_detail, error: c.error });
  }

  onEvent(ev) {
    if (ev.id !== undefined) {
      if (ev.id <= this.last) return; // already shown
      this.last = ev.id;
      // Anything after an input request means it was answered.
      if (ev.event !== 'input.requested') this.hideInput();
    }
    const d = ev.data || {};
    switch (ev.event) {
      case 'chat.created':
        this.note(ev, 'Chat created.');
        break;
      case 'chat.running':
        this.note(ev, 'Running.');
        break;
      case 'speaker.selected':
        this.speakerSelected(ev, d);
        break;
      case 'message':
        this.dropDraft(d.name);
        this.transcript.append(this.message(ev, d));
        break;
      case 'message.delta':
        this.delta(d);
        break;
      case 'input.requested':
        this.note(ev, d.kind === 'speaker' ? `Waiting for the next speaker to be picked: ${d.reason || ''}` : `Waiting for ${d.agent || 'a human'}: ${d.reason || ''}`);
        this.showInput(d);
        break;
      default:
        if (terminalEvents.has(ev.event)) {
          for (const name of [...this.drafts.keys()]) this.dropDraft(name);
          this.note(ev, `Chat ${d.status}: ${d.stop_reason}.`);
          this.showEnd(d);
        } else {
          this.note(ev, ev.event);
        }
    }
    if (ev.id !== undefined) this.scheduleRefresh();
    this.follow();
  }

  /** follow keeps the newest event in view while the reader is at the bottom. */
  follow() {
    const nearBottom = window.innerHeight + window.scrollY >= document.body.scrollHeight - 160;
    if (nearBottom) window.scrollTo(0, document.body.scrollHeight);
  }

  note(ev, text, ...extra) {
    this.transcript.append(el('li', { class: 'ev-note', 'data-seq': ev.id, 'data-event': ev.event }, text, ...extra));
  }

  speakerSelected(ev, d) {
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
    const kind = m.tool_calls?.length ? 'tool call' : m.role === 'tool' ? 'tool result' : m.code_result ? 'code execution' : m.handoff ? 'handoff' : '';
    const li = el('li', {
      class: 'msg', 'data-seq': ev.id, 'data-event': 'message', 'data-name': m.name,
      style: `--agent:${agentColour(m.name)}`,
    },
    el('div', { class: 'who' },
      el('span', { class: 'name' }, m.name),
      el('span', { class: 'meta' }, [m.role, kind].filter(Boolean).join(' · ')),
      m.usage ? el('span', { class: 'meta', 'data-usage': '' }, `${m.usage.prompt_tokens}+${m.usage.completion_tokens} tokens`) : null,
      el('span', { class: 'seq', title: m.created_at }, `#${m.seq} ${time(m.created_at)}`)));
    if (m.content) li.append(renderContent(m.content));
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

  delta(d) {
    let draft = this.drafts.get(d.name);
    if (!draft) {
      draft = el('li', { class: 'msg draft', 'data-draft': d.name, style: `--agent:${agentColour(d.name)}` },
        el('div', { class: 'who' }, el('span', { class: 'name' }, d.name), el('span', { class: 'meta' }, 'writing…')),
        el('div', { class: 'content' }));
      this.drafts.set(d.name, draft);
      this.transcript.append(draft);
    }
    $('.content', draft).append(d.content);
  }

  dropDraft(name) {
    const draft = this.drafts.get(name);
    if (draft) { draft.remove(); this.drafts.delete(name); }
  }

  showInput(p) {
    const panel = $('#input-panel', this.root);
    panel.hidden = false;
    panel.dataset.requestId = p.request_id;
    const err = el('p', { class: 'error', hidden: true });
    const send = async (body, button) => {
      button.disabled = true;
      try {
        await request('POST', `/v1/chats/${encodeURIComponent(this.id)}/input`, { request_id: p.request_id, ...body });
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

  hideInput() {
    const panel = $('#input-panel', this.root);
    panel.hidden = true;
    panel.replaceChildren();
  }

  showEnd(d) {
    this.ended = true;
    const box = $('#chat-end', this.root);
    box.hidden = false;
    box.className = 'chat-end ' + d.status;
    box.replaceChildren(...[
      el('strong', { 'data-stop-reason': d.stop_reason }, `${d.status}: ${d.stop_reason}`),
      d.stop_detail ? el('div', {}, d.stop_detail) : null,
      d.error ? el('div', { class: 'error' }, d.error) : null].filter(Boolean));
    $('#cancel', this.root).hidden = true;
    $('#erase', this.root).hidden = false;
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
      await request('DELETE', `/v1/chats/${encodeURIComponent(this.id)}`);
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
    const button = $('#cancel', this.root);
    button.disabled = true;
    try {
      await request('POST', `/v1/chats/${encodeURIComponent(this.id)}/cancel`, {});
    } catch (err) {
      this.showError(err);
      button.disabled = false;
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

// ---------- start ----------

if (apiKey()) keyButton.hidden = false;
list.start();
route();
