// `corral mcp` driven by the real MCP client (@modelcontextprotocol/sdk,
// pinned in ../package.json) over stdio, against a real `corral serve`
// (issue 17, docs/mcp.md).
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { canRun, corralBin, startDaemon } from '../e2b/daemon.mjs';

const run = canRun('MCP suite');

describe('corral mcp with the MCP SDK client', { skip: !run }, () => {
  let daemon;
  let client;
  let transport;
  let stderr = '';

  before(async () => {
    daemon = await startDaemon({ config: 'sandbox:\n  disk_limit: 256Mi\n  memory_limit: 512Mi\n' });
    transport = new StdioClientTransport({
      command: corralBin(),
      args: ['mcp', '--url', 'unix:' + join(daemon.dataDir, '..', 'corral.sock')],
      stderr: 'pipe',
    });
    transport.stderr?.on('data', (c) => { stderr += c.toString(); });
    client = new Client({ name: 'corral-test', version: '0.0.0' });
    await client.connect(transport);
  });

  after(async () => {
    if (client) await client.close();
    if (daemon) await daemon.stop();
  });

  async function call(name, args) {
    return client.callTool({ name, arguments: args });
  }

  test('initialize and tools/list: the six tools with input schemas', async () => {
    assert.equal(client.getServerVersion().name, 'corral');
    const { tools } = await client.listTools();
    const names = tools.map((t) => t.name).sort();
    assert.deepEqual(names, ['sandbox_create', 'sandbox_destroy', 'sandbox_exec',
                             'sandbox_list_files', 'sandbox_read_file', 'sandbox_write_file']);
    for (const t of tools) {
      assert.equal(t.inputSchema.type, 'object', t.name);
      assert.ok(t.description.length > 10, t.name);
    }
    const exec = tools.find((t) => t.name === 'sandbox_exec');
    assert.deepEqual(exec.inputSchema.required, ['sandbox_id', 'command']);
  });

  test('create, exec, write, read, list, destroy', async () => {
    const created = await call('sandbox_create', { timeout_s: 300, env: { GREETING: 'hi' } });
    assert.ok(!created.isError, JSON.stringify(created));
    const id = created.structuredContent.sandbox_id;
    assert.match(id, /^sb-/);
    assert.equal(JSON.parse(created.content[0].text).sandbox_id, id);

    const r = await call('sandbox_exec', { sandbox_id: id, command: 'echo "$GREETING"; echo err >&2; exit 3' });
    assert.ok(!r.isError, 'a non-zero exit is a normal result');
    assert.deepEqual(r.structuredContent, { exit_code: 3, stdout: 'hi\n', stderr: 'err\n', timed_out: false });

    const w = await call('sandbox_write_file', { sandbox_id: id, path: '/workspace/a/b.txt', content: 'hello' });
    assert.ok(!w.isError, JSON.stringify(w));
    assert.equal(w.structuredContent.size, 5);
    const bin = await call('sandbox_write_file', { sandbox_id: id, path: '/workspace/x.bin', content: 'AP8=', encoding: 'base64' });
    assert.ok(!bin.isError);
    const rd = await call('sandbox_read_file', { sandbox_id: id, path: '/workspace/a/b.txt' });
    assert.equal(rd.structuredContent.content, 'hello');
    assert.equal(rd.structuredContent.encoding, 'utf-8');
    const rb = await call('sandbox_read_file', { sandbox_id: id, path: '/workspace/x.bin' });
    assert.equal(rb.structuredContent.encoding, 'base64');
    assert.equal(rb.structuredContent.content, 'AP8=');
    const ls = await call('sandbox_list_files', { sandbox_id: id, path: '/workspace' });
    const names = ls.structuredContent.entries.map((e) => `${e.name}:${e.type}`).sort();
    assert.deepEqual(names, ['a:directory', 'x.bin:file']);
    const seen = await call('sandbox_exec', { sandbox_id: id, command: 'cat /workspace/a/b.txt' });
    assert.equal(seen.structuredContent.stdout, 'hello');

    const d = await call('sandbox_destroy', { sandbox_id: id });
    assert.deepEqual(d.structuredContent, { sandbox_id: id, destroyed: true });
  });

  test('failures are isError results, not protocol errors', async () => {
    const gone = await call('sandbox_exec', { sandbox_id: 'sb-000000000000', command: 'true' });
    assert.equal(gone.isError, true);
    assert.match(gone.content[0].text, /sb-000000000000|not found|no sandbox/i);
    const missing = await call('sandbox_exec', { command: 'true' });
    assert.equal(missing.isError, true);
    assert.match(missing.content[0].text, /sandbox_id/);
    const created = await call('sandbox_create', {});
    const id = created.structuredContent.sandbox_id;
    const escape = await call('sandbox_read_file', { sandbox_id: id, path: '/../../etc/shadow' });
    assert.equal(escape.isError, true);
    const nofile = await call('sandbox_read_file', { sandbox_id: id, path: '/workspace/none' });
    assert.equal(nofile.isError, true);
    await assert.rejects(client.callTool({ name: 'no_such_tool', arguments: {} }));
  });

  test('closing stdin ends the server and destroys the session\'s sandboxes', async () => {
    const created = await call('sandbox_create', {});
    const id = created.structuredContent.sandbox_id;
    await client.close();
    client = undefined;
    await new Promise((r) => setTimeout(r, 500));
    // Its sandboxes are gone: ask the daemon through another session.
    const check = new Client({ name: 'check', version: '0' });
    await check.connect(new StdioClientTransport({
      command: corralBin(), args: ['mcp', '--url', 'unix:' + join(daemon.dataDir, '..', 'corral.sock')],
    }));
    const r = await check.callTool({ name: 'sandbox_exec', arguments: { sandbox_id: id, command: 'true' } });
    assert.equal(r.isError, true, 'the sandbox is destroyed');
    await check.close();
  });
});

test('nothing but JSON-RPC on stdout, and EOF ends it', { skip: !run }, async () => {
  const daemon = await startDaemon({});
  try {
    const proc = spawn(corralBin(), ['mcp', '--url', 'unix:' + join(daemon.dataDir, '..', 'corral.sock')],
                       { stdio: ['pipe', 'pipe', 'pipe'] });
    let out = '';
    proc.stdout.on('data', (c) => { out += c.toString(); });
    const lines = [
      '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}',
      '{"jsonrpc":"2.0","method":"notifications/initialized"}',
      'not json',
      '{"jsonrpc":"2.0","id":2,"method":"nope"}',
      '{"jsonrpc":"2.0","id":3,"method":"ping"}',
      '{"jsonrpc":"2.0","id":4,"method":"initialize","params":{"protocolVersion":"1999-01-01"}}',
    ];
    proc.stdin.end(lines.join('\n') + '\n');
    const code = await new Promise((r) => proc.on('exit', r));
    assert.equal(code, 0);
    const answers = out.trim().split('\n').map((l) => JSON.parse(l));
    assert.equal(answers.length, 5, out);
    assert.equal(answers[0].result.protocolVersion, '2025-11-25');
    assert.equal(answers[1].error.code, -32700);
    assert.equal(answers[2].error.code, -32601);
    assert.deepEqual(answers[3].result, {});
    assert.equal(answers[4].result.protocolVersion, '2025-11-25', 'an unknown version gets ours');
  } finally {
    await daemon.stop();
  }
});
