// client.mjs: drives `sbx mcp` with the official TypeScript MCP SDK, as an MCP client
// application would: its Client over a StdioClientTransport that starts the server.
//
// Run by tests/it_mcp.c (typescript_sdk_client) with NODE_PATH at the node_modules that
// `make mcp-node` filled, and in the environment: SBX_BIN (the sbx to start), SBX_SOCKET
// (the daemon) and SBX_MCP_SANDBOX (a live sandbox to attach to). Exits 0 when every
// check passed; a failed check throws, and node exits non-zero with the reason.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';

// NODE_PATH is honoured by require(), not by import: the SDK's CommonJS build.
const require = createRequire(import.meta.url);
const { Client } = require('@modelcontextprotocol/sdk/client/index.js');
const { StdioClientTransport } = require('@modelcontextprotocol/sdk/client/stdio.js');
// The SDK's package.json is not exported: found above its client.
let dir = dirname(require.resolve('@modelcontextprotocol/sdk/client/index.js'));
while (!dir.endsWith('@modelcontextprotocol/sdk')) dir = dirname(dir);
const sdkVersion = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')).version;

const env = (name) => {
  const v = process.env[name];
  assert.ok(v, `${name} must be set`);
  return v;
};
const sandbox = env('SBX_MCP_SANDBOX');

const textOf = (result) => {
  assert.equal(result.content[0].type, 'text');
  return result.content[0].text;
};

const transport = new StdioClientTransport({
  command: env('SBX_BIN'),
  args: ['mcp', '--sandbox', sandbox],
  env: { ...process.env, SBX_SOCKET: env('SBX_SOCKET') },
  stderr: 'inherit',
});
const client = new Client({ name: 'sbx-it-mcp', version: '1.0.0' });
await client.connect(transport);

const server = client.getServerVersion();
assert.equal(server.name, 'sbx');
console.log(`connected: @modelcontextprotocol/sdk ${sdkVersion} to ${server.name} ${server.version}`);

// tools/list: the tool set, each with a schema.
const { tools } = await client.listTools();
const names = tools.map((t) => t.name).sort();
assert.deepEqual(names, ['command_output', 'edit_file', 'http_request', 'list_directory', 'read_file', 'restore',
  'run_command', 'sandbox_info', 'snapshot', 'write_file']);
for (const t of tools) {
  assert.equal(t.inputSchema.type, 'object', `${t.name} inputSchema`);
  assert.ok(t.description.length > 80, `${t.name} description`);
}
console.log(`tools: ${names.join(', ')}`);

// run_command: the SDK checks structuredContent against the tool's outputSchema.
let r = await client.callTool({ name: 'run_command', arguments: { command: 'echo hello from $0; id -u' } });
assert.ok(!r.isError, textOf(r));
assert.match(textOf(r), /^\[stdout\]\nhello from \/bin\/sh\n/);
assert.equal(r.structuredContent.exit_code, 0);
assert.equal(r.structuredContent.outcome, 'exited');
console.log('run_command: ok');

r = await client.callTool({ name: 'run_command', arguments: { argv: ['sh', '-c', 'echo bad >&2; exit 7'] } });
assert.equal(r.isError, true);
assert.equal(r.structuredContent.exit_code, 7);
assert.match(textOf(r), /\[stderr\]\nbad\n\[exit code 7/);
console.log('run_command (exit 7): ok');

// A background command: its id at once, then command_output (both checked against the
// outputSchema by the SDK): running, then waited for to its end.
r = await client.callTool({
  name: 'run_command', arguments: { command: 'echo bg started; sleep 0.5; echo bg done', background: true },
});
assert.ok(!r.isError, textOf(r));
assert.equal(r.structuredContent.outcome, 'running');
const bgId = r.structuredContent.command_id;
assert.match(bgId, /^c-\d+$/);
r = await client.callTool({ name: 'command_output', arguments: { command_id: bgId, wait_seconds: 20 } });
assert.ok(!r.isError, textOf(r));
assert.equal(r.structuredContent.outcome, 'exited');
assert.equal(r.structuredContent.stdout, 'bg started\nbg done\n');
console.log('run_command background, command_output: ok');

// write_file creates parents; read_file reads it back; list_directory shows it.
r = await client.callTool({
  name: 'write_file',
  arguments: { path: '/workspace/sdk/hello.txt', content: 'written by the TypeScript SDK\n' },
});
assert.ok(!r.isError, textOf(r));
r = await client.callTool({ name: 'read_file', arguments: { path: 'sdk/hello.txt' } });
assert.ok(!r.isError, textOf(r));
assert.equal(r.structuredContent.content, 'written by the TypeScript SDK\n');
assert.equal(r.structuredContent.next_offset, null);
console.log('write_file, read_file: ok');

r = await client.callTool({ name: 'list_directory', arguments: { path: '/workspace' } });
assert.ok(!r.isError, textOf(r));
assert.match(textOf(r), /^sdk\/$/m);
assert.ok(r.structuredContent.entries.some((e) => e.name === 'sdk' && e.is_dir));
console.log('list_directory: ok');

r = await client.callTool({ name: 'read_file', arguments: { path: '/workspace/absent' } });
assert.equal(r.isError, true);
assert.match(textOf(r), /NOT_FOUND/);

r = await client.callTool({ name: 'sandbox_info', arguments: {} });
assert.equal(r.structuredContent.id, sandbox);
assert.equal(r.structuredContent.mode, 'attached');
console.log('sandbox_info: ok');

await client.ping();

// A second client attached to the same sandbox while the first is connected: each sees
// what the other wrote (the README's attach block, `sbx mcp --sandbox ID`).
const connect = async (args, name) => {
  const c = new Client({ name, version: '1.0.0' });
  await c.connect(new StdioClientTransport({
    command: env('SBX_BIN'),
    args,
    env: { ...process.env, SBX_SOCKET: env('SBX_SOCKET') },
    stderr: 'inherit',
  }));
  return c;
};
const second = await connect(['mcp', '--sandbox', sandbox], 'sbx-it-mcp-second');
r = await second.callTool({ name: 'read_file', arguments: { path: '/workspace/sdk/hello.txt' } });
assert.equal(r.structuredContent.content, 'written by the TypeScript SDK\n');
r = await second.callTool({
  name: 'write_file', arguments: { path: '/workspace/sdk/reply.txt', content: 'from the second\n' },
});
assert.ok(!r.isError, textOf(r));
r = await client.callTool({ name: 'run_command', arguments: { command: 'cat sdk/reply.txt' } });
assert.match(textOf(r), /^\[stdout\]\nfrom the second\n/);
await second.close();
await client.close();
console.log('two clients share one sandbox: ok');

// The README's first block: `sbx mcp --memory 1G` creates a sandbox for the session,
// in which create, run, write, read and list work; it ends when the client closes
// (it_mcp.c checks that from the line printed here).
const owned = await connect(['mcp', '--memory', '1G'], 'sbx-it-mcp-owned');
r = await owned.callTool({ name: 'sandbox_info', arguments: {} });
assert.equal(r.structuredContent.mode, 'owned');
assert.notEqual(r.structuredContent.id, sandbox);
const ownedId = r.structuredContent.id;
r = await owned.callTool({ name: 'write_file', arguments: { path: 'app/main.py', content: 'print(6 * 7)\n' } });
assert.ok(!r.isError, textOf(r));
r = await owned.callTool({ name: 'run_command', arguments: { command: 'python3 app/main.py' } });
assert.ok(!r.isError, textOf(r));
assert.equal(r.structuredContent.stdout, '42\n');
r = await owned.callTool({ name: 'read_file', arguments: { path: '/workspace/app/main.py' } });
assert.equal(r.structuredContent.content, 'print(6 * 7)\n');
r = await owned.callTool({ name: 'list_directory', arguments: { path: '/workspace/app' } });
assert.deepEqual(r.structuredContent.entries.map((e) => e.name), ['main.py']);
r = await owned.callTool({ name: 'read_file', arguments: { path: '/workspace/sdk/hello.txt' } });
assert.equal(r.isError, true, 'the owned sandbox is not the attached one');
await owned.close();
console.log(`owned sandbox: ${ownedId}`);
// An allowlist sandbox (`sbx mcp --allow-host ...`): sandbox_info names its hosts (the SDK
// checks them against the outputSchema) and the proxy refuses another host.
const allow = await connect(['mcp', '--allow-host', 'Registry.test'], 'sbx-it-mcp-allow');
r = await allow.callTool({ name: 'sandbox_info', arguments: {} });
assert.equal(r.structuredContent.network, 'allowlist');
assert.deepEqual(r.structuredContent.allowed_hosts, ['registry.test']);
r = await allow.callTool({ name: 'run_command',
  arguments: { command: "curl -s -o /dev/null -w '%{http_code}' http://other.test/" } });
assert.equal(r.structuredContent.stdout, '403');
await allow.close();
console.log('allowlist sandbox: ok');
console.log('all checks passed');
