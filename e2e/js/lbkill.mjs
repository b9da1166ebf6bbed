// lbkill streams one run of a saved team through a load balancer with an
// official client, as an application would: AG-UI's HttpAgent, or the
// openai client's chat completion or Responses stream. It prints
// {"opened": …, "chat": …} once the run has said something (the test then
// kills the replica that runs it), then retries the same request (the
// same runId, or the same Idempotency-Key) until one attempt ends, and
// prints what the first attempt and the one that ended got. With "once",
// it makes the first attempt only (a second client of the same run).
//
//   node lbkill.mjs <base URL> <bearer key> <team> <agui|chat|responses> <idempotency key> [once]
import { HttpAgent } from '@ag-ui/client';
import OpenAI from 'openai';

const [base, apiKey, team, mode, key, once] = process.argv.slice(2);
const task = 'count slowly';
const line = (o) => process.stdout.write(JSON.stringify(o) + '\n');
// HttpAgent 1.0.0 raises a broken stream's error from runAgent and also
// leaves it unhandled on a promise of its own: noted, not fatal.
const unhandled = [];
process.on('unhandledRejection', (e) => unhandled.push(String(e?.message ?? e)));
let opened = false;
const open = (chat) => {
  if (!opened) line({ opened: true, chat });
  opened = true;
};

// attempt runs the request once: the texts it got, how it ended, and the
// error the client raised.
async function attempt() {
  const got = { texts: [], ended: '', error: '', messages: [] };
  try {
    if (mode === 'agui') {
      const agent = new HttpAgent({ url: `${base}/ag-ui/${team}`, threadId: `thread-${key}`, headers: { Authorization: `Bearer ${apiKey}` } });
      agent.addMessage({ id: 'task', role: 'user', content: task });
      await agent.runAgent({ runId: `run-${key}` }, {
        onTextMessageContentEvent: () => open(agent.threadId),
        onTextMessageEndEvent: ({ textMessageBuffer }) => got.texts.push(textMessageBuffer),
        onRunFinishedEvent: () => { got.ended = 'RUN_FINISHED'; },
        onRunErrorEvent: ({ event }) => { got.ended = `RUN_ERROR ${event.code}`; },
      });
      got.messages = agent.messages.map((m) => `${m.role}: ${m.content}`);
    } else {
      const client = new OpenAI({ baseURL: `${base}/openai/v1`, apiKey, maxRetries: 0 });
      const headers = { 'Idempotency-Key': key };
      if (mode === 'chat') {
        const stream = await client.chat.completions.create({ model: `team:${team}`, stream: true, messages: [{ role: 'user', content: task }] }, { headers });
        let content = '';
        for await (const chunk of stream) {
          if (chunk.choices[0]?.delta?.reasoning_content) open(chunk.id.replace(/^chatcmpl-/, ''));
          content += chunk.choices[0]?.delta?.content ?? '';
          if (chunk.choices[0]?.finish_reason) got.ended = chunk.choices[0].finish_reason;
        }
        got.texts.push(content);
      } else {
        const stream = client.responses.stream({ model: `team:${team}`, input: task }, { headers });
        let chat = '';
        stream.on('response.created', (e) => { chat = e.response.conversation.id; });
        stream.on('response.reasoning_text.delta', () => open(chat));
        const final = await stream.finalResponse();
        got.ended = final.status;
        got.texts.push(final.output_text);
      }
    }
    got.ended ||= 'cleanly';
  } catch (e) {
    got.error = `${e?.constructor?.name}: ${e?.message ?? e}`;
  }
  return got;
}

const out = { first: await attempt(), attempts: 1 };
for (; once !== 'once';) {
  const again = await attempt();
  if ((!again.error && !again.ended.startsWith('RUN_ERROR')) || out.attempts > 60) {
    out.again = again;
    break;
  }
  out.attempts++;
  out.lastError = again.error;
  await new Promise((r) => setTimeout(r, 500));
}
out.unhandled = unhandled;
line(out);
