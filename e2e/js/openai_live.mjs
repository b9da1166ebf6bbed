// openai_live streams one answer of a saved team with the official openai
// npm client and prints a JSON line per reasoning fragment as it arrives
// (with the chat it is of), then one with what the stream added up to.
// Used by the end-to-end tests to see a stream live before its run ends.
//
//   node openai_live.mjs <agentd base URL> <bearer key> <team> <chat|responses> <task>
import OpenAI from 'openai';

const [base, apiKey, team, mode, task] = process.argv.slice(2);
const client = new OpenAI({ baseURL: `${base}/openai/v1`, apiKey, maxRetries: 0 });
const model = `team:${team}`;
const line = (o) => process.stdout.write(JSON.stringify(o) + '\n');

if (mode === 'chat') {
  const stream = await client.chat.completions.create({ model, stream: true, messages: [{ role: 'user', content: task }] });
  let content = '';
  let reasoning = '';
  for await (const chunk of stream) {
    const d = chunk.choices[0]?.delta ?? {};
    if (d.reasoning_content) {
      reasoning += d.reasoning_content;
      line({ chat: chunk.id.replace(/^chatcmpl-/, ''), reasoning: d.reasoning_content });
    }
    if (d.content) content += d.content;
  }
  line({ done: true, content, reasoning });
} else {
  const stream = client.responses.stream({ model, input: task });
  let chat = '';
  stream.on('response.created', (e) => { chat = e.response.conversation.id; });
  stream.on('response.reasoning_text.delta', (e) => line({ chat, reasoning: e.delta }));
  const final = await stream.finalResponse();
  const reasoning = final.output.filter((o) => o.type === 'reasoning').map((o) => o.content.map((c) => c.text).join('')).join('\n\n');
  line({ done: true, content: final.output_text, reasoning, items: final.output.map((o) => o.type) });
}
