// Runs saved teams through the official AG-UI client (@ag-ui/client's
// HttpAgent) and prints what it saw as JSON: the events of each run and
// the messages the client holds after it.
//
//   node agui.mjs <base URL> <API key> <tool team> <human team> <approval team>
import { HttpAgent } from "@ag-ui/client";

const [base, key, toolTeam, humanTeam, approvalTeam] = process.argv.slice(2);

function agent(team) {
  return new HttpAgent({ url: `${base}/ag-ui/${team}`, headers: { Authorization: `Bearer ${key}` } });
}

// run runs the agent once and returns the events it got, the error it
// raised (if any) and its interrupts after the run.
async function run(a, params) {
  const events = [];
  let error = "";
  try {
    await a.runAgent(params, { onEvent: ({ event }) => { events.push(event); } });
  } catch (e) {
    error = String(e?.message ?? e);
  }
  return { events, error, interrupts: a.pendingInterrupts, messages: a.messages };
}

function user(a, text) {
  a.addMessage({ id: `u-${a.messages.length}`, role: "user", content: text });
}

const out = {};

const tools = agent(toolTeam);
user(tools, "Add 1 and 2.");
out.tools = await run(tools);

const human = agent(humanTeam);
user(human, "Write a draft.");
out.asked = await run(human);
const interrupt = human.pendingInterrupts[0];
out.answered = await run(human, { resume: [{ interruptId: interrupt?.id ?? "none", status: "resolved", payload: "one more pass" }] });
// The same resume again, from a client that lost its stream: the run as
// the answer took it, not a second answer nor a new run.
const lost = new HttpAgent({ url: `${base}/ag-ui/${humanTeam}`, headers: { Authorization: `Bearer ${key}` }, threadId: human.threadId });
out.answeredAgain = await run(lost, { resume: [{ interruptId: interrupt?.id ?? "none", status: "resolved", payload: "one more pass" }] });
user(human, "And a third.");
out.again = await run(human);
out.threadId = human.threadId;

// Approvals: the held call is approved with edited arguments.
const held = agent(approvalTeam);
user(held, "Add 1 and 2, with approval.");
out.held = await run(held);
const hold = held.pendingInterrupts[0];
out.approved = await run(held, { resume: [{ interruptId: hold?.id ?? "none", status: "resolved",
  payload: { approvals: [{ tool_call_id: hold?.toolCallId ?? "none", approve: true, arguments: { a: 2, b: 3 } }] } }] });

console.log(JSON.stringify(out));
