// openai runs a saved team through agentd's OpenAI-compatible API with the
// official openai npm client, as an application would, and prints one
// JSON object with what each call gave. Used by the end-to-end tests.
//
//   node openai.mjs <agentd base URL> <bearer key> <team>
import OpenAI from 'openai';

const [base, apiKey, team] = process.argv.slice(2);
const client = new OpenAI({ baseURL: `${base}/openai/v1`, apiKey, maxRetries: 0 });
const model = `team:${team}`;
const out = {};

out.models = [];
for await (const m of client.models.list()) out.models.push(m.id);

const done = await client.chat.completions.create({
  model,
  messages: [
    { role: 'system', content: 'Earlier context.' },
    { role: 'user', content: 'first question' },
    { role: 'assistant', content: 'first answer' },
    { role: 'user', content: 'Say hello.' },
  ],
});
out.completion = { id: done.id, content: done.choices[0].message.content, finish: done.choices[0].finish_reason, usage: done.usage };

const stream = await client.chat.completions.create({
  model, stream: true, stream_options: { include_usage: true },
  messages: [{ role: 'user', content: 'Stream it.' }],
});
out.stream = { id: '', pieces: [], finish: null, usage: null };
for await (const chunk of stream) {
  out.stream.id = chunk.id;
  if (chunk.usage) out.stream.usage = chunk.usage;
  const choice = chunk.choices[0];
  if (!choice) continue;
  if (choice.delta.content) out.stream.pieces.push(choice.delta.content);
  if (choice.finish_reason) out.stream.finish = choice.finish_reason;
}

const first = await client.responses.create({ model, input: 'Turn one.' });
out.turn1 = { id: first.id, conversation: first.conversation?.id, text: first.output_text, status: first.status, usage: first.usage };
const second = client.responses.stream({ model, input: 'Turn two.', previous_response_id: first.id });
const deltas = [];
second.on('response.output_text.delta', (e) => deltas.push(e.delta));
const final = await second.finalResponse();
out.turn2 = { id: final.id, conversation: final.conversation?.id, text: final.output_text, status: final.status, previous: final.previous_response_id, deltas };
const again = await client.responses.retrieve(first.id);
out.retrieved = { id: again.id, text: again.output_text, status: again.status };

try {
  await client.chat.completions.create({ model: 'team:no-such-team', messages: [{ role: 'user', content: 'hi' }] });
  out.unknown = { error: 'none' };
} catch (e) {
  out.unknown = { status: e.status, type: e.type, code: e.code, param: e.param, message: e.message };
}

process.stdout.write(JSON.stringify(out) + '\n');
