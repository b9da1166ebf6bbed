// Runs a saved team's thread through the official AG-UI client
// (@ag-ui/client's HttpAgent), one run per task, as a chat UI does: each
// task is added to the one agent's messages and the agent run. Prints a
// JSON line per run: the ids of the messages it began, in order, the
// texts of the messages it ended, how it ended, the error it raised, and
// the messages the agent holds after it, each as "role: content". Before each run after the first it waits for a line
// on its standard input: the test reads the thread in between. A task
// "=again" adds no message and runs the run before again, with its runId
// (a client that lost the stream of a run and posts it once more).
//
//   node agui_thread.mjs <base URL> <API key> <team> <task>...
import { HttpAgent } from '@ag-ui/client';
import { createInterface } from 'node:readline';

const [base, key, team, ...tasks] = process.argv.slice(2);
const agent = new HttpAgent({ url: `${base}/ag-ui/${team}`, headers: { Authorization: `Bearer ${key}` } });
const input = createInterface({ input: process.stdin })[Symbol.asyncIterator]();
let runId = '';
for (const [i, task] of tasks.entries()) {
  if (i > 0) await input.next();
  if (task !== '=again') {
    agent.addMessage({ id: `u-${i}`, role: 'user', content: task });
    runId = `run-${i}`;
  }
  const got = { started: [], texts: [], ended: '', error: '', messages: [] };
  try {
    await agent.runAgent({ runId }, {
      onTextMessageStartEvent: ({ event }) => { got.started.push(event.messageId); },
      onTextMessageEndEvent: ({ textMessageBuffer }) => { got.texts.push(textMessageBuffer); },
      onRunFinishedEvent: () => { got.ended = 'RUN_FINISHED'; },
      onRunErrorEvent: ({ event }) => { got.ended = `RUN_ERROR ${event.code}`; },
    });
  } catch (e) {
    got.error = String(e?.message ?? e);
  }
  got.messages = agent.messages.map((m) => `${m.role}: ${m.content ?? ''}`);
  process.stdout.write(JSON.stringify(got) + '\n');
}
process.exit(0);
