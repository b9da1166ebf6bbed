// The AG-UI state of a thread through the official client (@ag-ui/client's
// HttpAgent): a first run with the client's own state, then, once the
// test has changed the chat's variables (it writes a line on stdin), a
// second run after the client changed its state too. Prints one JSON line
// per run: the state HttpAgent holds after it, and the STATE_SNAPSHOTs it
// got.
//
//   node agui_state.mjs <base URL> <API key> <team>
import { createInterface } from "node:readline";
import { HttpAgent } from "@ag-ui/client";

const [base, key, team] = process.argv.slice(2);
const agent = new HttpAgent({ url: `${base}/ag-ui/${team}`, headers: { Authorization: `Bearer ${key}` }, initialState: { tier: "gold" } });

async function run(text) {
  agent.addMessage({ id: `u-${agent.messages.length}`, role: "user", content: text });
  const snapshots = [];
  let error = "";
  try {
    await agent.runAgent({}, { onStateSnapshotEvent: ({ event }) => { snapshots.push(event.snapshot); } });
  } catch (e) {
    error = String(e?.message ?? e);
  }
  console.log(JSON.stringify({ thread: agent.threadId, state: agent.state, snapshots, error }));
}

await run("First task.");
const lines = createInterface({ input: process.stdin })[Symbol.asyncIterator]();
await lines.next();
agent.setState({ ...agent.state, tier: "platinum" });
await run("Second task.");
process.exit(0);
