// The public API, as the console uses it: JSON over fetch and server-sent
// events read with fetch (not EventSource, which cannot send the
// Authorization header). Every request goes to this page's own origin.

const keyStorage = 'agentd.apiKey';

/** The API key of this browser tab, or "" (sessionStorage: gone with the tab). */
export function apiKey() { return sessionStorage.getItem(keyStorage) || ''; }
export function setAPIKey(key) {
  if (key) sessionStorage.setItem(keyStorage, key); else sessionStorage.removeItem(keyStorage);
}

/** An error answer of the API, with its problem+json body when there is one. */
export class APIError extends Error {
  constructor(status, problem) {
    super(problem?.detail || problem?.title || `HTTP ${status}`);
    this.status = status;
    this.problem = problem;
  }
}

let unauthorizedHandler = () => {};
/** Called with the error whenever the API answers 401. */
export function onUnauthorized(fn) { unauthorizedHandler = fn; }

function headers(extra) {
  const h = { Accept: 'application/json', ...extra };
  const key = apiKey();
  if (key) h.Authorization = 'Bearer ' + key;
  return h;
}

/**
 * request calls the API. A body (an object or a JSON string) is always sent
 * as application/json; state-changing requests always carry one, so that
 * servers may require that content type on them.
 */
export async function request(method, path, body) {
  const init = { method, headers: headers(), cache: 'no-store', credentials: 'same-origin', redirect: 'error' };
  if (body !== undefined) {
    init.headers['Content-Type'] = 'application/json';
    init.body = typeof body === 'string' ? body : JSON.stringify(body);
  }
  const resp = await fetch(path, init);
  const text = await resp.text();
  let data = null;
  if (text) {
    try { data = JSON.parse(text); } catch { data = null; }
  }
  if (!resp.ok) {
    const err = new APIError(resp.status, data);
    if (resp.status === 401) unauthorizedHandler(err);
    throw err;
  }
  return data;
}

/**
 * streamEvents follows a chat's server-sent events from after `after`,
 * calling onEvent({id, event, data}) for each, until the terminal event of
 * the chat's latest run, a 204 (the client has seen the end) or signal
 * aborts. With follow it asks the server to keep the stream open across
 * runs (?follow=true) and goes on until signal aborts. After a drop it
 * reconnects with Last-Event-ID set to the last id it received, as an
 * EventSource would, so no event is lost or repeated.
 */
export async function streamEvents(chatID, after, onEvent, { signal, follow = false, onState = () => {} } = {}) {
  let last = after;
  let delay = 500;
  const url = `/v1/chats/${encodeURIComponent(chatID)}/events` + (follow ? '?follow=true' : '');
  while (!signal?.aborted) {
    try {
      onState('connecting');
      const resp = await fetch(url, {
        headers: headers({ Accept: 'text/event-stream', 'Last-Event-ID': String(last) }),
        cache: 'no-store', credentials: 'same-origin', signal,
      });
      if (resp.status === 204) { onState('ended'); return; }
      if (!resp.ok) {
        let problem = null;
        try { problem = await resp.json(); } catch { /* not JSON */ }
        const err = new APIError(resp.status, problem);
        if (resp.status === 401) unauthorizedHandler(err);
        if (resp.status >= 400 && resp.status < 500) throw err; // retrying cannot help
        throw Object.assign(err, { retry: true });
      }
      onState('live');
      delay = 500;
      let ended = false;
      for await (const ev of parseSSE(resp.body, signal)) {
        if (ev.id !== undefined) last = ev.id;
        onEvent(ev);
        // Without follow the server ends the stream after the latest run's
        // terminal event; a terminal event of an earlier run (replayed) is
        // followed by more, so only a terminal event that ends it counts.
        ended = !follow && (ev.event === 'chat.completed' || ev.event === 'chat.failed' || ev.event === 'chat.cancelled');
      }
      if (ended) { onState('ended'); return; }
    } catch (err) {
      if (signal?.aborted) return;
      if (err instanceof APIError && !err.retry) { onState('error'); throw err; }
    }
    // An abort ends the body's read as if the stream had ended: that is no
    // drop to reconnect from.
    if (signal?.aborted) return;
    onState('reconnecting');
    await sleep(delay, signal);
    delay = Math.min(delay * 2, 10000);
  }
}

function sleep(ms, signal) {
  return new Promise((resolve) => {
    const t = setTimeout(resolve, ms);
    signal?.addEventListener('abort', () => { clearTimeout(t); resolve(); }, { once: true });
  });
}

/**
 * parseSSE yields the events of a text/event-stream body (HTML Living
 * Standard, "Interpreting an event stream"): lines end at CR, LF or CRLF,
 * data lines are joined with LF, comments are skipped, an event is
 * dispatched at a blank line.
 */
export async function* parseSSE(body, signal) {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  const abort = () => reader.cancel().catch(() => {});
  signal?.addEventListener('abort', abort, { once: true });
  let buf = '';
  let ev = { data: [] };
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buf += value;
      let m;
      // A lone CR at the end of the buffer may be half of a CRLF: wait.
      while ((m = /\r\n|\n|\r(?!$)/.exec(buf)) !== null) {
        const line = buf.slice(0, m.index);
        buf = buf.slice(m.index + m[0].length);
        if (line === '') {
          if (ev.data.length > 0 || ev.event) {
            const text = ev.data.join('\n');
            let data = null;
            try { data = text ? JSON.parse(text) : null; } catch { data = text; }
            yield { id: ev.id, event: ev.event || 'message', data };
          }
          ev = { data: [] };
          continue;
        }
        if (line.startsWith(':')) continue;
        const colon = line.indexOf(':');
        const field = colon < 0 ? line : line.slice(0, colon);
        let val = colon < 0 ? '' : line.slice(colon + 1);
        if (val.startsWith(' ')) val = val.slice(1);
        if (field === 'data') ev.data.push(val);
        else if (field === 'event') ev.event = val;
        else if (field === 'id' && /^\d+$/.test(val)) ev.id = Number(val);
      }
    }
  } finally {
    signal?.removeEventListener('abort', abort);
  }
}
