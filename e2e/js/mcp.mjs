// The official MCP TypeScript client (@modelcontextprotocol/sdk) against a
// running agentd's /mcp: prints one JSON line of what it saw, which
// e2e/mcp_test.go checks.
//
// usage: node mcp.mjs BASE_URL API_KEY SCENARIO [OTHER_URL]
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ToolListChangedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';

const [base, key, scenario, other] = process.argv.slice(2);
const auth = { Authorization: `Bearer ${key}` };

const client = new Client({ name: 'agentd-e2e', version: '1.0.0' });
let listChanged;
let changed = new Promise((resolve) => { listChanged = resolve; });
client.setNotificationHandler(ToolListChangedNotificationSchema, () => listChanged());
const nextChange = () => { changed = new Promise((resolve) => { listChanged = resolve; }); };
const awaitChange = (after) => Promise.race([changed,
  new Promise((_, reject) => setTimeout(() => reject(new Error(`no tools/list_changed within 10s ${after}`)), 10000))]);
await client.connect(new StreamableHTTPClientTransport(new URL(`${base}/mcp`), { requestInit: { headers: auth } }));

// saveFresh saves the team 'fresh' through the agentd at url and returns
// the answer's status.
const saveFresh = async (url) => (await fetch(`${url}/v1/teams/fresh`, {
  method: 'PUT', headers: { ...auth, 'Content-Type': 'application/json' },
  body: JSON.stringify({ termination: { text_mention: { text: 'TERMINATE' } },
    agents: [{ name: 'solo', type: 'assistant', model: { provider: 'replay', responses: ['fresh TERMINATE'] } }] }),
})).status;

const out = {};
const toolNames = async () => (await client.listTools()).tools.map((t) => t.name).sort();
out.tools = await toolNames();

switch (scenario) {
  case 'call': {
    const progress = [];
    const res = await client.callTool({ name: 'run_echo', arguments: { task: 'say it' } }, undefined,
      { onprogress: (p) => progress.push(p.message) });
    out.call = { text: res.content.map((c) => c.text).join(''), isError: res.isError ?? false, structured: res.structuredContent };
    out.progress = progress;
    const read = await client.readResource({ uri: `agentd://chats/${res.structuredContent.chat_id}` });
    out.transcript = read.contents[0].text;
    const listed = await client.listResources();
    out.resources = listed.resources.map((r) => r.uri);
    // A team saved now is a tool the session is told about (the
    // notification of the first listing's tools waited out first, as in
    // 'elsewhere').
    await awaitChange('after the first listing');
    nextChange();
    out.put = await saveFresh(base);
    await awaitChange('after the save');
    out.toolsAfter = await toolNames();
    break;
  }
  case 'elsewhere': {
    // A team saved on another replica (OTHER_URL) is a tool this
    // session, on BASE_URL, is told about. The first listing made this
    // replica's tools, of which the session was told (once: the server
    // sends one notification for a burst of changes): that one is waited
    // out, so that the one awaited after the save is the save's.
    await awaitChange('after the first listing');
    nextChange();
    out.put = await saveFresh(other);
    await awaitChange('after the save on the other replica');
    out.toolsAfter = await toolNames();
    const res = await client.callTool({ name: 'run_fresh', arguments: { task: 'go' } });
    out.call = { text: res.content.map((c) => c.text).join(''), isError: res.isError ?? false, structured: res.structuredContent };
    break;
  }
  case 'cancel': {
    // Cancel the call once the team has said something: the run ends.
    const ac = new AbortController();
    let chatSeen = 0;
    try {
      await client.callTool({ name: 'run_slow', arguments: { task: 'take your time' } }, undefined,
        { signal: ac.signal, onprogress: () => { chatSeen++; ac.abort(); } });
      out.cancel = 'completed';
    } catch (e) {
      out.cancel = e.name === 'AbortError' || /abort/i.test(String(e)) ? 'aborted' : String(e);
    }
    out.progressBeforeAbort = chatSeen;
    const listed = await client.listResources();
    out.resources = listed.resources.map((r) => r.uri);
    break;
  }
  case 'lbend': {
    // A call through a load balancer: once the team has said something,
    // tell the test (which ends the replica serving the session), then
    // print how the call ended: its result, or the error the client
    // raised (a cut call without an answer raises its timeout).
    let opened = false;
    try {
      const res = await client.callTool({ name: 'run_slow', arguments: { task: 'count slowly' } }, undefined, {
        timeout: 20000,
        onprogress: () => {
          if (!opened) console.log(JSON.stringify({ opened: true }));
          opened = true;
        },
      });
      out.call = { text: res.content.map((c) => c.text).join(''), isError: res.isError ?? false, structured: res.structuredContent };
    } catch (e) {
      out.error = `${e?.constructor?.name}: ${e?.message ?? e}`;
    }
    // The session died with its replica: nothing to close.
    console.log(JSON.stringify(out));
    process.exit(0);
  }
  default:
    throw new Error(`unknown scenario ${scenario}`);
}
await client.close();
console.log(JSON.stringify(out));
