// follow streams a chat's events with the npm eventsource client (the
// WHATWG EventSource) and prints one JSON line per persisted event, per
// (re)connection and per error; it exits 0 after the terminal event, 1 if
// the client gives up. Used by the end-to-end tests and CI.
//
//   node follow.mjs <events URL> [bearer key]
import { EventSource } from 'eventsource';

const [url, key] = process.argv.slice(2);
const init = key ? { fetch: (u, i) => fetch(u, { ...i, headers: { ...i.headers, Authorization: `Bearer ${key}` } }) } : {};
const es = new EventSource(url, init);
const print = (o) => process.stdout.write(JSON.stringify(o) + '\n');
let opens = 0;
es.onopen = () => print({ open: ++opens });
es.onerror = (e) => {
  print({ error: String(e.message ?? e.type), state: es.readyState });
  if (es.readyState === EventSource.CLOSED) process.exit(1);
};
const persisted = ['chat.created', 'run.started', 'chat.running', 'speaker.selected', 'message', 'input.requested'];
const terminal = ['chat.completed', 'chat.failed', 'chat.cancelled'];
for (const type of persisted) {
  es.addEventListener(type, (e) => print({ id: Number(e.lastEventId), type }));
}
for (const type of terminal) {
  es.addEventListener(type, (e) => {
    print({ id: Number(e.lastEventId), type });
    es.close();
    process.exit(0);
  });
}
