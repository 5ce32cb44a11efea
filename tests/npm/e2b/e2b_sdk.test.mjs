// The unmodified `e2b` npm SDK (pinned in ../package.json) against a real
// `corral serve` and its E2B facade (issue 17, docs/e2b.md). Every call goes
// through real sandboxes; what a test asserts is what the SDK returns.
import { after, afterEach, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import {
  AuthenticationError, CommandExitError, FileNotFoundError, Sandbox,
} from 'e2b';
import { canRun, startDaemon } from './daemon.mjs';

const run = canRun('e2b SDK suite');

describe('e2b SDK against corral', { skip: !run }, () => {
  let daemon;
  let opts;
  const made = [];

  before(async () => {
    daemon = await startDaemon({
      // No network for these sandboxes: the suite needs none, and it must
      // pass on a machine without the network engine.
      config: 'serve:\n  e2b:\n    network: none\nsandbox:\n  disk_limit: 256Mi\n  memory_limit: 512Mi\n',
    });
    opts = {
      apiKey: daemon.apiKey.replace(/^crl_/, 'e2b_'),
      apiUrl: daemon.url + '/e2b',
      sandboxUrl: daemon.url + '/e2b/envd',
      requestTimeoutMs: 30000,
    };
  });

  // Each test's sandboxes go with it (the daemon's capacity is finite).
  afterEach(async () => {
    for (const s of made.splice(0)) await Sandbox.kill(s, opts).catch(() => {});
  });

  after(async () => {
    if (daemon) await daemon.stop();
  });

  async function create(extra = {}) {
    const sbx = await Sandbox.create({ ...opts, ...extra });
    made.push(sbx.sandboxId);
    return sbx;
  }

  test('create with envs, metadata and timeout; commands.run', async () => {
    const sbx = await create({ envs: { STAGE: 'dev' }, metadata: { who: 'suite', case: 'run' }, timeoutMs: 120000 });
    assert.match(sbx.sandboxId, /^sb-/);
    const r = await sbx.commands.run('echo hi; echo "stage=$STAGE"; echo warn >&2');
    assert.equal(r.exitCode, 0);
    assert.equal(r.stdout, 'hi\nstage=dev\n');
    assert.equal(r.stderr, 'warn\n');
    const info = await sbx.getInfo();
    assert.equal(info.sandboxId, sbx.sandboxId);
    assert.deepEqual(info.metadata, { who: 'suite', case: 'run' });
    const lifetime = info.endAt.getTime() - info.startedAt.getTime();
    assert.ok(lifetime > 100000 && lifetime <= 121000, `lifetime ${lifetime} ms`);
  });

  test('a failing command throws CommandExitError with its exit code and stderr', async () => {
    const sbx = await create();
    await assert.rejects(sbx.commands.run('echo oops >&2; exit 3'), (err) => {
      assert.ok(err instanceof CommandExitError, String(err));
      assert.equal(err.exitCode, 3);
      assert.equal(err.stderr, 'oops\n');
      return true;
    });
    // envs and cwd of one command.
    const r = await sbx.commands.run('pwd; echo $X', { cwd: '/tmp', envs: { X: 'y' } });
    assert.equal(r.stdout, '/tmp\ny\n');
  });

  test('a background command streams its output before it ends; list, kill', async () => {
    const sbx = await create();
    const seen = [];
    const started = Date.now();
    const handle = await sbx.commands.run(
      'for i in 1 2 3; do echo t$i; sleep 0.4; done', {
        background: true,
        onStdout: (d) => seen.push({ d, at: Date.now() - started }),
      });
    assert.ok(handle.pid > 0);
    const result = await handle.wait();
    const ended = Date.now() - started;
    assert.equal(result.stdout, 't1\nt2\nt3\n');
    assert.ok(seen.length >= 2, `onStdout called ${seen.length} times`);
    assert.ok(seen[0].at < ended - 500, `first output at ${seen[0].at} ms, end at ${ended} ms`);

    const sleeper = await sbx.commands.run('sleep 60', { background: true });
    const listed = await sbx.commands.list();
    assert.ok(listed.some((p) => p.pid === sleeper.pid && p.cmd === '/bin/bash'),
              JSON.stringify(listed));
    assert.equal(await sbx.commands.kill(sleeper.pid), true);
    await assert.rejects(sleeper.wait(), (err) => err instanceof CommandExitError);
    const after = await sbx.commands.list();
    assert.ok(!after.some((p) => p.pid === sleeper.pid));
    assert.equal(await sbx.commands.kill(sleeper.pid), false);
  });

  test('the pid is the process id inside the sandbox', async () => {
    const sbx = await create();
    const handle = await sbx.commands.run('echo $$; sleep 30', { background: true });
    await new Promise((r) => setTimeout(r, 300));
    const ps = await sbx.commands.run(`kill -0 ${handle.pid} && echo alive`);
    assert.equal(ps.stdout, 'alive\n');
    await handle.kill();
  });

  test('sendStdin and closeStdin', async () => {
    const sbx = await create();
    const out = [];
    const handle = await sbx.commands.run('cat', { background: true, stdin: true, onStdout: (d) => out.push(d) });
    await sbx.commands.sendStdin(handle.pid, 'hello\n');
    await handle.sendStdin('world\n');
    await handle.closeStdin();
    const r = await handle.wait();
    assert.equal(r.stdout, 'hello\nworld\n');
    // Without stdin: true, stdin is at its end: cat ends at once.
    const quick = await sbx.commands.run('cat; echo done');
    assert.equal(quick.stdout, 'done\n');
  });

  test('pty: a login shell on a terminal of the sandbox, input, resize, exit code', async () => {
    const sbx = await create();
    let out = '';
    const dec = new TextDecoder();
    const enc = new TextEncoder();
    const term = await sbx.pty.create({ cols: 80, rows: 24, onData: (d) => { out += dec.decode(d); } });
    const until = async (what) => {
      for (let i = 0; i < 200 && !out.includes(what); ++i) await new Promise((r) => setTimeout(r, 50));
      assert.ok(out.includes(what), `no ${JSON.stringify(what)} in ${JSON.stringify(out)}`);
    };
    await until('$ ');  // the prompt: bash runs interactively
    await sbx.pty.sendInput(term.pid, enc.encode('echo hi-$((6*7)); tty; stty size\n'));
    await until('24 80');
    assert.match(out, /hi-42\r\n\/dev\/pts\/\d+\r\n24 80/);
    await sbx.pty.resize(term.pid, { cols: 100, rows: 30 });
    await sbx.pty.sendInput(term.pid, enc.encode('stty size; exit 3\n'));
    const ended = await term.wait().then(() => null, (e) => e);
    assert.equal(ended?.exitCode, 3);
    assert.ok(out.includes('30 100'), JSON.stringify(out));
    // The terminal is the sandbox's own: a plain command sees no terminal.
    const plain = await sbx.commands.run('tty || true');
    assert.equal(plain.stdout.trim(), 'not a tty');
  });

  test('files: write, read, list, exists, makeDir, remove, rename, getInfo', async () => {
    const sbx = await create();
    const info = await sbx.files.write('/tmp/a.txt', 'hello');
    assert.equal(info.path, '/tmp/a.txt');
    assert.equal(await sbx.files.read('/tmp/a.txt'), 'hello');
    const bytes = new Uint8Array([0, 1, 2, 255, 254]);
    await sbx.files.write('/tmp/d/b.bin', bytes.buffer);
    assert.deepEqual(new Uint8Array(await sbx.files.read('/tmp/d/b.bin', { format: 'bytes' })), bytes);
    const stream = await sbx.files.read('/tmp/a.txt', { format: 'stream' });
    let text = '';
    for await (const chunk of stream) text += Buffer.from(chunk).toString();
    assert.equal(text, 'hello');
    const many = await sbx.files.write([
      { path: '/tmp/m/1.txt', data: 'one' },
      { path: '/tmp/m/2.txt', data: 'two' },
    ]);
    assert.equal(many.length, 2);
    const listed = await sbx.files.list('/tmp/m');
    assert.deepEqual(listed.map((e) => e.name).sort(), ['1.txt', '2.txt']);
    assert.equal(listed[0].type, 'file');
    assert.equal(await sbx.files.exists('/tmp/m/1.txt'), true);
    assert.equal(await sbx.files.exists('/tmp/m/nope'), false);
    assert.equal(await sbx.files.makeDir('/tmp/newdir/sub'), true);
    assert.equal(await sbx.files.makeDir('/tmp/newdir/sub'), false);
    const dirInfo = await sbx.files.getInfo('/tmp/newdir');
    assert.equal(dirInfo.type, 'dir');
    const renamed = await sbx.files.rename('/tmp/a.txt', '/tmp/c.txt');
    assert.equal(renamed.path, '/tmp/c.txt');
    assert.equal(await sbx.files.exists('/tmp/a.txt'), false);
    const fi = await sbx.files.getInfo('/tmp/c.txt');
    assert.equal(fi.size, 5);
    assert.equal(fi.type, 'file');
    await sbx.files.remove('/tmp/m');
    assert.equal(await sbx.files.exists('/tmp/m'), false);
    await sbx.files.remove('/tmp/never-was');  // not an error, as envd
    await assert.rejects(sbx.files.read('/tmp/missing.txt'), (e) => e instanceof FileNotFoundError);
    // envd 0.5.7: raw uploads, gzip-compressed or streamed.
    assert.equal((await sbx.getInfo()).envdVersion, '0.5.7');
    await sbx.files.write('/tmp/z/g.txt', 'zipped '.repeat(1000), { gzip: true });
    assert.equal(await sbx.files.read('/tmp/z/g.txt'), 'zipped '.repeat(1000));
    const parts = ['str', 'eam'];
    const source = new ReadableStream({
      pull(c) { if (parts.length) c.enqueue(new TextEncoder().encode(parts.shift())); else c.close(); },
    });
    await sbx.files.write('/tmp/s.txt', source);
    assert.equal(await sbx.files.read('/tmp/s.txt'), 'stream');
    // What the SDK wrote, the sandbox sees.
    const cat = await sbx.commands.run('cat /tmp/c.txt /tmp/m/1.txt 2>/dev/null; cat /tmp/d/b.bin | wc -c');
    assert.equal(cat.stdout, 'hello5\n');
  });

  test('files.watchDir streams creates, writes and removes, recursively', async () => {
    const sbx = await create();
    await sbx.files.makeDir('/tmp/w');
    const events = [];
    const handle = await sbx.files.watchDir('/tmp/w', (e) => events.push(`${e.type}:${e.name}`),
                                            { recursive: true });
    await sbx.files.write('/tmp/w/a.txt', 'x');
    await sbx.commands.run('mkdir /tmp/w/sub');
    await new Promise((r) => setTimeout(r, 400));  // the new directory's watch is added
    await sbx.commands.run('echo y > /tmp/w/sub/b.txt; rm /tmp/w/a.txt; mv /tmp/w/sub/b.txt /tmp/w/c.txt');
    const until = Date.now() + 5000;
    while (Date.now() < until && !events.includes('rename:c.txt')) await new Promise((r) => setTimeout(r, 100));
    await handle.stop();
    for (const want of ['create:a.txt', 'write:a.txt', 'create:sub', 'create:sub/b.txt', 'remove:a.txt',
                        'rename:sub/b.txt', 'rename:c.txt'])
      assert.ok(events.includes(want), `${want} in ${events.join(' ')}`);
    await assert.rejects(sbx.files.watchDir('/tmp/nowhere', () => {}), (e) => e instanceof FileNotFoundError);
    await assert.rejects(sbx.files.watchDir('/proc', () => {}));
  });

  test('setTimeout, Sandbox.list with metadata, connect by id', async () => {
    const sbx = await create({ metadata: { suite: 'list', n: 'x y&z' } });
    await create({ metadata: { suite: 'other' } });
    await sbx.setTimeout(30000);
    const info = await sbx.getInfo();
    const left = info.endAt.getTime() - Date.now();
    assert.ok(left > 20000 && left <= 31000, `${left} ms left`);
    const page = Sandbox.list({ ...opts, query: { metadata: { suite: 'list', n: 'x y&z' } } });
    const items = await page.nextItems();
    assert.deepEqual(items.map((s) => s.sandboxId), [sbx.sandboxId]);
    assert.deepEqual(items[0].metadata, { suite: 'list', n: 'x y&z' });
    const again = await Sandbox.connect(sbx.sandboxId, opts);
    const r = await again.commands.run('echo connected');
    assert.equal(r.stdout, 'connected\n');
  });

  test('kill: isRunning false, gone from the list, a second kill is false', async () => {
    const sbx = await create({ metadata: { suite: 'kill' } });
    assert.equal(await sbx.isRunning(), true);
    await sbx.kill();
    assert.equal(await sbx.isRunning(), false);
    const items = await Sandbox.list({ ...opts, query: { metadata: { suite: 'kill' } } }).nextItems();
    assert.equal(items.length, 0);
    assert.equal(await Sandbox.kill(sbx.sandboxId, opts), false);
  });

  test('a wrong API key and a wrong access token are refused', async () => {
    await assert.rejects(Sandbox.create({ ...opts, apiKey: 'e2b_' + '0'.repeat(64) }),
                         (e) => e instanceof AuthenticationError);
    await assert.rejects(Sandbox.list({ ...opts, apiKey: 'nope-nope-nope-nope' }).nextItems(),
                         (e) => e instanceof AuthenticationError);
    const a = await create();
    const b = await create();
    // B's token does not open A, and no token opens nothing.
    const tokenB = b.envdAccessToken;
    assert.equal(typeof tokenB, 'string');
    for (const token of [undefined, 'x'.repeat(64), tokenB]) {
      const headers = { 'content-type': 'application/json', 'e2b-sandbox-id': a.sandboxId };
      if (token) headers['x-access-token'] = token;
      const res = await fetch(opts.sandboxUrl + '/process.Process/List', { method: 'POST', headers, body: '{}' });
      assert.equal(res.status, 401, `token ${token ? token.slice(0, 6) : 'none'}`);
      const body = await res.json();
      assert.equal(body.code, 'unauthenticated');
    }
  });
});
