// The official A2A client (@a2a-js/sdk) against a running agentd: each
// scenario talks to one saved team's agent and prints one JSON line of
// what it saw, which e2e/a2a_test.go checks.
//
// usage: node a2a.mjs BASE_URL API_KEY SCENARIO TEAM [WEBHOOK_URL]
import { ClientFactory, ClientFactoryOptions, DefaultAgentCardResolver, JsonRpcTransportFactory } from '@a2a-js/sdk/client';
import { Role, TaskState } from '@a2a-js/sdk';

const [base, key, scenario, team, hookURL] = process.argv.slice(2);

// Every request carries the API key: the card is the tenant's too.
const fetchImpl = (url, init = {}) => {
  const headers = new Headers(init.headers ?? {});
  if (key) headers.set('Authorization', `Bearer ${key}`);
  return fetch(url, { ...init, headers });
};

const factory = new ClientFactory(ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
  transports: [new JsonRpcTransportFactory({ fetchImpl })],
  cardResolver: new DefaultAgentCardResolver({ fetchImpl }),
}));

let n = 0;
const message = (text, extra = {}) => ({
  messageId: `${scenario}-${process.pid}-${++n}`,
  role: Role.ROLE_USER,
  parts: [{ content: { $case: 'text', value: text } }],
  ...extra,
});
const state = (s) => TaskState[s];
const textOf = (m) => (m?.parts ?? []).map((p) => (p.content?.$case === 'text' ? p.content.value : '')).join('');
const summary = (t) => ({
  id: t.id, contextId: t.contextId, state: state(t.status?.state),
  statusText: textOf(t.status?.message),
  artifacts: (t.artifacts ?? []).map((a) => a.parts.map((p) => p.content?.value).join('')),
  history: (t.history ?? []).map((m) => ({ role: Role[m.role], text: textOf(m) })),
});

// streamed collects a stream's events as kinds and states.
async function streamed(iter) {
  const events = [];
  for await (const ev of iter) {
    const p = ev.payload;
    switch (p?.$case) {
      case 'task': events.push({ kind: 'task', id: p.value.id, contextId: p.value.contextId, state: state(p.value.status?.state) }); break;
      case 'statusUpdate': events.push({ kind: 'status', state: state(p.value.status?.state), text: textOf(p.value.status?.message) }); break;
      case 'artifactUpdate': events.push({ kind: 'artifact', text: p.value.artifact.parts.map((x) => x.content?.value).join('') }); break;
      default: events.push({ kind: p?.$case ?? 'unknown' });
    }
  }
  return events;
}

const out = {};
const client = await factory.createFromUrl(`${base}/a2a/${team}/`);
const card = client.agentCard;
out.card = { name: card.name, version: card.version, streaming: card.capabilities?.streaming,
  url: card.supportedInterfaces?.[0]?.url, security: Object.keys(card.securitySchemes ?? {}) };

switch (scenario) {
  case 'send': {
    // Blocking send, then a second message in the same context.
    const first = await client.sendMessage({ message: message('first task') });
    out.first = summary(first);
    const second = await client.sendMessage({ message: message('second task', { contextId: first.contextId }) });
    out.second = summary(second);
    const got = await client.getTask({ id: first.id, historyLength: 1 });
    out.getFirst = summary(got);
    break;
  }
  case 'stream': {
    out.events = await streamed(client.sendMessageStream({ message: message('streamed task') }));
    break;
  }
  case 'human': {
    // The team's user_proxy asks a human: input-required, answered in the task.
    const asked = await client.sendMessage({ message: message('write a release note') });
    out.asked = summary(asked);
    const answered = await client.sendMessage({ message: message('one more pass', { taskId: asked.id, contextId: asked.contextId }) });
    out.answered = summary(answered);
    const done = await client.sendMessage({ message: message('exit', { contextId: asked.contextId }) });
    out.done = summary(done);
    break;
  }
  case 'cancel': {
    const started = await client.sendMessage({ message: message('a long task'), configuration: { returnImmediately: true } });
    out.started = summary(started);
    const canceled = await client.cancelTask({ id: started.id });
    out.canceled = summary(canceled);
    try {
      await client.cancelTask({ id: started.id });
      out.again = 'no error';
    } catch (e) {
      out.again = e.name;
    }
    break;
  }
  case 'push': {
    // The task's push config, given with its first message, is its chat's webhook.
    const done = await client.sendMessage({ message: message('notify me'), configuration: { taskPushNotificationConfig: { url: hookURL } } });
    out.done = summary(done);
    out.got = await client.getTaskPushNotificationConfig({ taskId: done.id, id: 'webhook' });
    out.list = (await client.listTaskPushNotificationConfig({ taskId: done.id })).configs.map((c) => c.url);
    out.same = (await client.createTaskPushNotificationConfig({ taskId: done.id, url: hookURL })).url;
    try {
      await client.createTaskPushNotificationConfig({ taskId: done.id, url: `${hookURL}/other` });
      out.other = 'no error';
    } catch (e) {
      out.other = e.name;
    }
    break;
  }
  case 'resubscribe': {
    // Stream a task; once it has said something, tell the test (which
    // ends the replica serving it), then subscribe again until it ends.
    const first = [];
    let task;
    try {
      for await (const ev of client.sendMessageStream({ message: message('count slowly') })) {
        const p = ev.payload;
        if (p.$case === 'task') task = p.value;
        if (p.$case === 'statusUpdate' && p.value.status?.message) {
          first.push(p.value.status.message.messageId);
          if (first.length === 1) console.log(JSON.stringify({ opened: true, contextId: task.contextId, taskId: task.id }));
        }
      }
      out.firstEnded = 'cleanly';
    } catch (e) {
      out.firstEnded = 'broken';
      out.firstError = String(e);
    }
    out.first = first;
    out.attempts = 0;
    for (;;) {
      out.attempts++;
      const snapshot = [];
      const later = [];
      let final;
      try {
        for await (const ev of client.resubscribeTask({ id: task.id })) {
          const p = ev.payload;
          if (p.$case === 'task') snapshot.push(...(p.value.history ?? []).filter((m) => m.role === Role.ROLE_AGENT).map((m) => m.messageId));
          if (p.$case === 'statusUpdate') {
            if (p.value.status?.message && p.value.status.state === TaskState.TASK_STATE_WORKING) later.push(p.value.status.message.messageId);
            final = state(p.value.status?.state);
          }
        }
        out.snapshot = snapshot;
        out.later = later;
        out.final = final;
        break;
      } catch (e) {
        out.lastError = String(e);
        if (out.attempts > 60) throw e;
        await new Promise((r) => setTimeout(r, 500));
      }
    }
    break;
  }
  default:
    throw new Error(`unknown scenario ${scenario}`);
}
console.log(JSON.stringify(out));
