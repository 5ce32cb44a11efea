// Bad input and faults at the E2B facade (issue 17, "Bad input and
// faults"): malformed Connect envelopes, huge lengths, bad JSON, unknown
// methods, chunked bodies, wrong tokens, a client that goes away, a
// sandbox destroyed under a stream, a deadline. Each gets the protocol's
// answer, the daemon stays up, and nothing crosses between sandboxes.
import { after, afterEach, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { InvalidArgumentError, Sandbox } from 'e2b';
import { canRun, startDaemon } from './daemon.mjs';

const run = canRun('e2b fault suite');

function envelope(flags, text) {
  const body = Buffer.from(text);
  const head = Buffer.alloc(5);
  head[0] = flags;
  head.writeUInt32BE(body.length, 1);
  return Buffer.concat([head, body]);
}

// Splits a Connect stream body into its envelopes.
function envelopes(buf) {
  const out = [];
  let i = 0;
  while (i + 5 <= buf.length) {
    const len = buf.readUInt32BE(i + 1);
    out.push({ flags: buf[i], json: JSON.parse(buf.subarray(i + 5, i + 5 + len).toString()) });
    i += 5 + len;
  }
  assert.equal(i, buf.length, 'no partial envelope at the end');
  return out;
}

// One raw request; resolves {status, headers, body: Buffer}.
function request(url, { method = 'POST', headers = {}, body, chunked = false, piece = 3 } = {}) {
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method, headers }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, body: Buffer.concat(chunks) }));
    });
    req.on('error', reject);
    if (body !== undefined) {
      if (chunked) {
        for (let i = 0; i < body.length; i += piece) req.write(body.subarray(i, i + piece));
      } else {
        req.setHeader('content-length', body.length);
        req.write(body);
      }
    }
    req.end();
  });
}

describe('e2b facade faults', { skip: !run }, () => {
  let daemon;
  let opts;
  let envd;
  const made = [];

  before(async () => {
    daemon = await startDaemon({
      config: 'serve:\n  e2b:\n    network: none\nsandbox:\n  disk_limit: 256Mi\n  memory_limit: 512Mi\n',
    });
    opts = {
      apiKey: daemon.apiKey,
      apiUrl: daemon.url + '/e2b',
      sandboxUrl: daemon.url + '/e2b/envd',
      requestTimeoutMs: 30000,
    };
    envd = opts.sandboxUrl;
  });
  afterEach(async () => {
    for (const s of made.splice(0)) await Sandbox.kill(s, opts).catch(() => {});
  });
  after(async () => {
    if (daemon) await daemon.stop();
  });

  async function create() {
    const sbx = await Sandbox.create(opts);
    made.push(sbx.sandboxId);
    return sbx;
  }
  function headers(sbx, type = 'application/json') {
    return { 'content-type': type, 'e2b-sandbox-id': sbx.sandboxId, 'x-access-token': sbx.envdAccessToken };
  }
  async function alive() {
    const res = await request(daemon.url + '/healthz', { method: 'GET' });
    assert.equal(res.status, 200, 'the daemon is still up');
  }

  test('malformed envelopes, huge lengths and bad JSON get invalid_argument', async () => {
    const sbx = await create();
    const start = envd + '/process.Process/Start';
    const h = headers(sbx, 'application/connect+json');
    const good = envelope(0, JSON.stringify({ process: { cmd: '/bin/true' } }));
    const cases = {
      'too short': Buffer.from([0, 0, 0]),
      'length past the body': Buffer.concat([Buffer.from([0, 0, 0, 1, 0]), Buffer.from('{}')]),
      'huge length': Buffer.concat([Buffer.from([0, 0xff, 0xff, 0xff, 0xff]), Buffer.from('{}')]),
      'compressed flag': envelope(1, '{}'),
      'end-stream flag': envelope(2, '{}'),
      'two envelopes': Buffer.concat([good, good]),
      'bad JSON': envelope(0, '{"process":'),
      'no command': envelope(0, '{"process":{}}'),
      'args not strings': envelope(0, '{"process":{"cmd":"x","args":[1]}}'),
    };
    for (const [name, body] of Object.entries(cases)) {
      const res = await request(start, { headers: h, body });
      if (res.status === 200) {
        const [end] = envelopes(res.body);
        assert.equal(end.flags, 2, name);
        assert.equal(end.json.error.code, 'invalid_argument', name);
      } else {
        assert.equal(res.status, 400, name);
        assert.equal(JSON.parse(res.body).code, 'invalid_argument', name);
      }
    }
    // Unary: wrong content type, bad JSON, unknown method and service.
    const list = envd + '/process.Process/List';
    let res = await request(list, { headers: headers(sbx, 'application/proto'), body: Buffer.from('') });
    assert.equal(res.status, 400);
    res = await request(envd + '/filesystem.Filesystem/Stat', { headers: headers(sbx), body: Buffer.from('{') });
    assert.equal(JSON.parse(res.body).code, 'invalid_argument');
    for (const m of ['process.Process/Nope', 'nope.Nope/List', 'filesystem.Filesystem/Nope']) {
      res = await request(`${envd}/${m}`, { headers: headers(sbx), body: Buffer.from('{}') });
      assert.equal(res.status, 501, m);
      assert.equal(JSON.parse(res.body).code, 'unimplemented', m);
    }
    await alive();
  });

  test('a chunked request body is read like one with a length', async () => {
    const sbx = await create();
    const body = envelope(0, JSON.stringify({ process: { cmd: '/bin/echo', args: ['chunked'] } }));
    const res = await request(envd + '/process.Process/Start', {
      headers: headers(sbx, 'application/connect+json'), body, chunked: true,
    });
    assert.equal(res.status, 200);
    const events = envelopes(res.body);
    assert.ok(events[0].json.event.start.pid > 0);
    const out = events.filter((e) => e.json.event?.data?.stdout)
      .map((e) => Buffer.from(e.json.event.data.stdout, 'base64').toString()).join('');
    assert.equal(out, 'chunked\n');
    assert.equal(events.at(-2).json.event.end.exitCode ?? 0, 0);
    assert.deepEqual(events.at(-1), { flags: 2, json: {} });
  });

  test('a corrupt or cut gzip upload is refused and leaves an empty file', async () => {
    const sbx = await create();
    const { gzipSync } = await import('node:zlib');
    const good = gzipSync(Buffer.from('hello '.repeat(10000)));
    const h = { ...headers(sbx, 'application/octet-stream'), 'content-encoding': 'gzip' };
    for (const [name, body] of [['cut', good.subarray(0, good.length - 20)],
                                ['corrupt', Buffer.concat([good.subarray(0, 30), Buffer.alloc(40, 0x55), good.subarray(70)])],
                                ['trailing bytes', Buffer.concat([good, Buffer.from('x')])]]) {
      const res = await request(envd + '/files?path=%2Ftmp%2Fz.txt', { headers: h, body });
      assert.equal(res.status, 400, name + ': ' + res.body);
      const size = (await sbx.commands.run('stat -c %s /tmp/z.txt')).stdout.trim();
      assert.equal(size, '0', name);
    }
    const res = await request(envd + '/files?path=%2Ftmp%2Fz.txt', { headers: { ...h, 'content-encoding': 'br' }, body: good });
    assert.equal(res.status, 415);
    const ok = await request(envd + '/files?path=%2Ftmp%2Fz.txt', { headers: h, body: good, chunked: true });
    assert.equal(ok.status, 200, String(ok.body));
    assert.equal((await sbx.commands.run('wc -c < /tmp/z.txt')).stdout.trim(), '60000');
    await alive();
  });

  test('a multipart upload streams into its file: a broken one leaves it empty, memory stays flat', async () => {
    const sbx = await create();
    const boundary = 'corral-test-boundary';
    const h = headers(sbx, 'multipart/form-data; boundary=' + boundary);
    const head = (name, file) => Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="${name}"` +
      (file ? `; filename="${file}"` : '') + '\r\nContent-Type: application/octet-stream\r\n\r\n');
    const close = Buffer.from(`\r\n--${boundary}--\r\n`);
    const bytes = Buffer.alloc(300000, 0x61);
    const size = async (p) => (await sbx.commands.run(`stat -c %s ${p} 2>/dev/null || echo none`)).stdout.trim();
    // Broken after the file's bytes began. Cut before its boundary line: the
    // file under way is left empty (written, then given back), as corral's
    // PUT does. Broken after its boundary line (which ends the part): the
    // file is whole and the request still answers the error.
    const cases = {
      'cut before its closing boundary': Buffer.concat([head('file', '/tmp/m.bin'), bytes]),
      'boundary followed by junk': Buffer.concat([head('file', '/tmp/m.bin'), bytes, Buffer.from(`\r\n--${boundary}junk`)]),
      'a closing boundary with bytes after it': Buffer.concat([head('file', '/tmp/m.bin'), bytes, close, Buffer.from('x')]),
    };
    for (const [name, body] of Object.entries(cases)) {
      const res = await request(envd + '/files', { headers: h, body, chunked: true, piece: 65536 });
      assert.equal(res.status, 400, name + ': ' + res.body);
      assert.equal(JSON.parse(res.body).code, 400, name);
      assert.equal(await size('/tmp/m.bin'), name.startsWith('cut') ? '0' : String(bytes.length), name);
    }
    // Two files; the second part's head is refused: the first is whole, the
    // second never made.
    let res = await request(envd + '/files', {
      headers: h,
      body: Buffer.concat([head('file', '/tmp/one.bin'), bytes, Buffer.from(`\r\n--${boundary}\r\nContent-Disposition: attachment; name="file"\r\n\r\nzz`), close]),
    });
    assert.equal(res.status, 400, String(res.body));
    assert.match(JSON.parse(res.body).message, /not form-data/);
    assert.equal(await size('/tmp/one.bin'), String(bytes.length));
    // A file part without a path, and a body with no file part.
    res = await request(envd + '/files', { headers: h, body: Buffer.concat([head('file'), bytes, close]) });
    assert.equal(res.status, 400);
    assert.match(JSON.parse(res.body).message, /without a path/);
    res = await request(envd + '/files', { headers: h, body: Buffer.concat([head('note', 'x'), bytes, close]) });
    assert.equal(res.status, 400);
    assert.match(JSON.parse(res.body).message, /no part named "file"/);
    // 160 MiB through one request: the daemon's peak memory grows by far
    // less than the body (it was read whole before: at least 160 MiB).
    const hwm = () => Number(/VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${daemon.pid}/status`, 'utf8'))[1]);
    const before = hwm();
    const big = Buffer.alloc(160 << 20, 0x62);
    res = await request(envd + '/files?path=big.bin', {
      headers: h, body: Buffer.concat([head('file', 'big.bin'), big, close]), chunked: true, piece: 1 << 20,
    });
    assert.equal(res.status, 200, String(res.body));
    assert.equal(await size('big.bin'), String(big.length));
    const grown = hwm() - before;
    assert.ok(grown < 48 * 1024, `the daemon's peak RSS grew by ${grown} kB for a 160 MiB upload`);
    await alive();
  });

  test('tokens: none, wrong, another sandbox\'s, and a missing sandbox header', async () => {
    const a = await create();
    const b = await create();
    const body = Buffer.from(JSON.stringify({ path: '/etc/hostname' }));
    const stat = envd + '/filesystem.Filesystem/Stat';
    for (const token of [undefined, '', 'x', b.envdAccessToken, a.envdAccessToken.toUpperCase()]) {
      const h = { 'content-type': 'application/json', 'e2b-sandbox-id': a.sandboxId };
      if (token !== undefined) h['x-access-token'] = token;
      const res = await request(stat, { headers: h, body });
      assert.equal(res.status, 401, `token ${JSON.stringify(token)?.slice(0, 10)}`);
    }
    // The right token with another sandbox's id.
    let res = await request(stat, {
      headers: { 'content-type': 'application/json', 'e2b-sandbox-id': b.sandboxId, 'x-access-token': a.envdAccessToken },
      body,
    });
    assert.equal(res.status, 401);
    res = await request(stat, { headers: { 'content-type': 'application/json', 'x-access-token': a.envdAccessToken }, body });
    assert.equal(res.status, 400);
    // The control plane without a key, with a wrong one.
    res = await request(opts.apiUrl + '/v2/sandboxes', { method: 'GET' });
    assert.equal(res.status, 401);
    assert.equal(JSON.parse(res.body).code, 401);
    await alive();
  });

  // The polling watchers (CreateWatcher, GetWatcherEvents, RemoveWatcher:
  // the Python SDK's synchronous watch_dir; the JS SDK never calls them).
  async function unary(sbx, method, body, h = headers(sbx)) {
    const res = await request(`${envd}/filesystem.Filesystem/${method}`, { headers: h, body: Buffer.from(JSON.stringify(body)) });
    return { status: res.status, json: JSON.parse(res.body.toString() || '{}') };
  }
  async function metric(name) {
    const res = await request(daemon.url + '/metrics', { method: 'GET', headers: { authorization: 'Bearer ' + daemon.apiKey } });
    let sum = 0;
    for (const line of res.body.toString().split('\n'))
      if (line.startsWith(name + ' ') || line.startsWith(name + '{')) sum += Number(line.split(' ').pop());
    return sum;
  }

  test('polling watchers: the changes since the last call, removal, scope and errors', async () => {
    const sbx = await create();
    await sbx.files.makeDir('/tmp/pw');
    let r = await unary(sbx, 'CreateWatcher', { path: '/tmp/pw', recursive: true });
    assert.equal(r.status, 200, JSON.stringify(r.json));
    const id = r.json.watcherId;
    assert.match(id, /^watcher-[0-9a-f]{32}$/);
    r = await unary(sbx, 'GetWatcherEvents', { watcherId: id });
    assert.deepEqual(r.json, { events: [] });
    await sbx.files.write('/tmp/pw/a.txt', 'x');
    await sbx.commands.run('mkdir /tmp/pw/sub');
    r = await unary(sbx, 'GetWatcherEvents', { watcherId: id });  // the new directory is watched from here
    const first = r.json.events.map((e) => `${e.type}:${e.name}`);
    for (const want of ['EVENT_TYPE_CREATE:a.txt', 'EVENT_TYPE_WRITE:a.txt', 'EVENT_TYPE_CREATE:sub'])
      assert.ok(first.includes(want), `${want} in ${first.join(' ')}`);
    await sbx.commands.run('echo y > /tmp/pw/sub/b.txt; rm /tmp/pw/a.txt; mv /tmp/pw/sub/b.txt /tmp/pw/c.txt');
    r = await unary(sbx, 'GetWatcherEvents', { watcherId: id });
    const second = r.json.events.map((e) => `${e.type}:${e.name}`);
    for (const want of ['EVENT_TYPE_CREATE:sub/b.txt', 'EVENT_TYPE_REMOVE:a.txt', 'EVENT_TYPE_RENAME:sub/b.txt',
                        'EVENT_TYPE_RENAME:c.txt'])
      assert.ok(second.includes(want), `${want} in ${second.join(' ')}`);
    assert.ok(!second.includes('EVENT_TYPE_CREATE:a.txt'), 'events already given are not given again');
    // Another sandbox cannot read or remove it, even knowing its id.
    const other = await create();
    r = await unary(other, 'GetWatcherEvents', { watcherId: id });
    assert.equal(r.status, 404);
    assert.equal(r.json.code, 'not_found');
    r = await unary(other, 'RemoveWatcher', { watcherId: id });
    assert.equal(r.status, 404);
    r = await unary(sbx, 'RemoveWatcher', { watcherId: id });
    assert.equal(r.status, 200);
    for (const m of ['GetWatcherEvents', 'RemoveWatcher']) {
      r = await unary(sbx, m, { watcherId: id });
      assert.equal(r.status, 404, m);
    }
    // Bad requests: a missing directory, a kernel file system, no id, a wrong type.
    r = await unary(sbx, 'CreateWatcher', { path: '/tmp/nowhere' });
    assert.equal(r.json.code, 'not_found');
    r = await unary(sbx, 'CreateWatcher', { path: '/proc' });
    assert.notEqual(r.status, 200);
    r = await unary(sbx, 'GetWatcherEvents', {});
    assert.equal(r.json.code, 'invalid_argument');
    r = await unary(sbx, 'GetWatcherEvents', { watcherId: 7 });
    assert.equal(r.json.code, 'invalid_argument');
    // A watcher whose directory goes gives its last events, then is gone.
    await sbx.files.makeDir('/tmp/gone');
    r = await unary(sbx, 'CreateWatcher', { path: '/tmp/gone' });
    const goneId = r.json.watcherId;
    await sbx.commands.run('touch /tmp/gone/f; rm -r /tmp/gone');
    r = await unary(sbx, 'GetWatcherEvents', { watcherId: goneId });
    assert.ok(r.json.events.some((e) => e.name === 'f'), JSON.stringify(r.json));
    r = await unary(sbx, 'GetWatcherEvents', { watcherId: goneId });
    assert.equal(r.status, 404);
    await alive();
  });

  // The daemon's open inotify instances (the facade's watches hold one each).
  function inotifyFds() {
    let n = 0;
    for (const fd of readdirSync(`/proc/${daemon.pid}/fd`)) {
      try {
        if (readlinkSync(`/proc/${daemon.pid}/fd/${fd}`) === 'anon_inode:inotify') ++n;
      } catch {}  // closed meanwhile
    }
    return n;
  }

  test('watches are bounded per sandbox; a kill with watchers left is prompt and leaves nothing', async () => {
    const before = inotifyFds();
    const sbx = await create();
    const ids = [];
    for (let i = 0; i < 8; ++i) {
      const r = await unary(sbx, 'CreateWatcher', { path: '/tmp' });
      assert.equal(r.status, 200, `watcher ${i}: ${JSON.stringify(r.json)}`);
      ids.push(r.json.watcherId);
    }
    let r = await unary(sbx, 'CreateWatcher', { path: '/tmp' });
    assert.equal(r.json.code, 'resource_exhausted');
    assert.match(r.json.message, /at most 8 per sandbox/);
    // A stream takes from the same share.
    const res = await request(envd + '/filesystem.Filesystem/WatchDir', {
      headers: headers(sbx, 'application/connect+json'), body: envelope(0, JSON.stringify({ path: '/tmp' })),
    });
    assert.equal(envelopes(res.body).pop().json.error.code, 'resource_exhausted');
    // Another sandbox has its own share.
    const other = await create();
    r = await unary(other, 'CreateWatcher', { path: '/tmp' });
    assert.equal(r.status, 200);
    // Removing one gives its place back.
    assert.equal((await unary(sbx, 'RemoveWatcher', { watcherId: ids.pop() })).status, 200);
    assert.equal((await unary(sbx, 'CreateWatcher', { path: '/tmp' })).status, 200);
    // The watchers hold the sandbox's directories open: the kill drops
    // them first, so it neither waits for them nor leaves anything.
    await sbx.files.write('/tmp/data.bin', Buffer.alloc(1 << 20, 7));
    const residue = await metric('corral_destroy_residue_items_total');
    const waits = await metric('corral_teardown_lease_timeouts_total');
    const t0 = Date.now();
    await Sandbox.kill(sbx.sandboxId, opts);
    assert.ok(Date.now() - t0 < 3000, `kill took ${Date.now() - t0} ms`);
    assert.equal(await metric('corral_destroy_residue_items_total'), residue);
    assert.equal(await metric('corral_teardown_lease_timeouts_total'), waits);
    const audit = readFileSync(daemon.dataDir + '/audit.log', 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l));
    const destroyed = audit.filter((a) => a.type === 'sandbox.destroy' && a.sandbox === sbx.sandboxId);
    assert.equal(destroyed.at(-1).outcome, 'cleaned');
    // Its watchers are closed (the other sandbox's one is still open).
    assert.equal(inotifyFds(), before + 1);
    // Its tickets are back: 47 more fit (the other sandbox holds one), in
    // six sandboxes, and then the total of 48 is reached.
    let last;
    for (let n = 0; n < 47; ++n) {
      if (n % 8 === 0) last = await create();
      r = await unary(last, 'CreateWatcher', { path: '/tmp' });
      assert.equal(r.status, 200, `watcher ${n}: ${JSON.stringify(r.json)}`);
    }
    r = await unary(last, 'CreateWatcher', { path: '/tmp' });
    assert.equal(r.json.code, 'resource_exhausted');
    assert.match(r.json.message, /48 in all/);
    await alive();
  });

  // StreamInput (a client stream; the JS SDK never calls it): a raw
  // client keeps the request open between messages.
  function openStream(url, h) {
    let req;
    const done = new Promise((resolve, reject) => {
      req = http.request(url, { method: 'POST', headers: h }, (res) => {
        const chunks = [];
        res.on('data', (c) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, body: Buffer.concat(chunks) }));
      });
      req.on('error', reject);
    });
    req.flushHeaders();
    return { req, done };
  }
  const b64 = (t) => Buffer.from(t).toString('base64');
  async function until(what, check, ms = 10000) {
    for (const end = Date.now() + ms; Date.now() < end;) {
      if (check()) return;
      await new Promise((r) => setTimeout(r, 50));
    }
    assert.fail('timed out waiting for ' + what);
  }

  test('StreamInput writes each message to stdin as it arrives, and ends with the request', async () => {
    const sbx = await create();
    let out = '';
    const cat = await sbx.commands.run('cat', { background: true, stdin: true, onStdout: (d) => { out += d; } });
    const { req, done } = openStream(envd + '/process.Process/StreamInput', headers(sbx, 'application/connect+json'));
    req.write(envelope(0, JSON.stringify({ start: { process: { pid: cat.pid } } })));
    req.write(envelope(0, JSON.stringify({ data: { input: { stdin: b64('hello\n') } } })));
    // Written while the request is still open: the stream is not buffered.
    await until('the first line, before the request ends', () => out.includes('hello\n'));
    req.write(envelope(0, '{"keepalive":{}}'));
    const big = 'x'.repeat(200000) + '\n';
    req.write(envelope(0, JSON.stringify({ data: { input: { stdin: b64(big) } } })));
    req.end(envelope(0, JSON.stringify({ data: { input: { stdin: b64('world\n') } } })));
    const res = await done;
    assert.equal(res.status, 200, String(res.body));
    assert.match(res.headers['content-type'], /^application\/connect\+json/);
    assert.deepEqual(envelopes(res.body), [{ flags: 0, json: {} }, { flags: 2, json: {} }]);
    await until('the rest', () => out.endsWith('world\n'));
    assert.equal(out, 'hello\n' + big + 'world\n');
    // The stream kept no stdin open of its own: closing it ends cat.
    const close = await request(envd + '/process.Process/CloseStdin', {
      headers: headers(sbx), body: Buffer.from(JSON.stringify({ process: { pid: cat.pid } })),
    });
    assert.equal(close.status, 200, String(close.body));
    assert.equal((await cat.wait()).exitCode, 0);
    await alive();
  });

  test('StreamInput errors end the stream with their code', async () => {
    const sbx = await create();
    const cat = await sbx.commands.run('cat', { background: true, stdin: true });
    const noStdin = await sbx.commands.run('sleep 30', { background: true });
    const url = envd + '/process.Process/StreamInput';
    const h = headers(sbx, 'application/connect+json');
    const start = (pid) => envelope(0, JSON.stringify({ start: { process: { pid } } }));
    const data = (t) => envelope(0, JSON.stringify({ data: { input: { stdin: b64(t) } } }));
    const cases = {
      'data before start': [Buffer.concat([data('x')]), 'invalid_argument'],
      'no start at all': [Buffer.alloc(0), 'invalid_argument'],
      'a second start': [Buffer.concat([start(cat.pid), start(cat.pid)]), 'invalid_argument'],
      'an unknown pid': [Buffer.concat([start(999999), data('x')]), 'not_found'],
      'a closed stdin': [Buffer.concat([start(noStdin.pid), data('x')]), 'failed_precondition'],
      'terminal input to a process without one': [Buffer.concat([start(cat.pid),
        envelope(0, JSON.stringify({ data: { input: { pty: b64('x') } } }))]), 'failed_precondition'],
      'a compressed message': [Buffer.concat([start(cat.pid), envelope(1, '{}')]), 'invalid_argument'],
      'an end-stream flag': [Buffer.concat([start(cat.pid), envelope(2, '{}')]), 'invalid_argument'],
      'two events in one message': [envelope(0, '{"start":{"process":{"pid":1}},"keepalive":{}}'), 'invalid_argument'],
      'bad JSON': [envelope(0, '{"data":'), 'invalid_argument'],
      'cut inside a message': [Buffer.concat([start(cat.pid), data('x').subarray(0, 7)]), 'invalid_argument'],
      'a huge length': [Buffer.concat([start(cat.pid), Buffer.from([0, 0xff, 0xff, 0xff, 0xff])]), 'invalid_argument'],
    };
    for (const [name, [body, code]] of Object.entries(cases)) {
      const res = await request(url, { headers: h, body, chunked: true, piece: 5 });
      assert.equal(res.status, 200, name + ': ' + res.body);
      const events = envelopes(res.body);
      assert.equal(events.length, 1, name);
      assert.equal(events[0].flags, 2, name);
      assert.equal(events[0].json.error?.code, code, name + ': ' + JSON.stringify(events[0].json));
    }
    // Another sandbox's token, and the unary content type: refused before
    // any byte reaches a process.
    const other = await create();
    let res = await request(url, { headers: { ...h, 'x-access-token': other.envdAccessToken },
                                   body: Buffer.concat([start(cat.pid), data('x')]) });
    assert.equal(res.status, 401, String(res.body));
    res = await request(url, { headers: headers(sbx), body: Buffer.concat([start(cat.pid), data('x')]) });
    assert.equal(res.status, 400, String(res.body));
    // Update resizes a terminal: a process without one, a size out of
    // range and an unknown pid are refused.
    const update = (body) => request(envd + '/process.Process/Update', { headers: headers(sbx), body: Buffer.from(JSON.stringify(body)) });
    res = await update({ process: { pid: cat.pid }, pty: { size: { cols: 80, rows: 24 } } });
    assert.equal(JSON.parse(res.body).code, 'failed_precondition', String(res.body));
    for (const size of [{ cols: 0, rows: 24 }, { cols: 80, rows: 70000 }, { cols: 80 }]) {
      res = await update({ process: { pid: cat.pid }, pty: { size } });
      assert.equal(JSON.parse(res.body).code, 'invalid_argument', JSON.stringify(size));
    }
    res = await update({ process: { pid: 999999 }, pty: { size: { cols: 80, rows: 24 } } });
    assert.equal(JSON.parse(res.body).code, 'not_found');
    await cat.kill();
    await noStdin.kill();
    await alive();
  });

  test('a client that goes away leaves the process running; connect sees what follows', async () => {
    const sbx = await create();
    const handle = await sbx.commands.run('sleep 0.5; for i in 1 2 3 4 5 6; do echo n$i; sleep 0.3; done',
                                          { background: true, timeoutMs: 0 });
    await handle.disconnect();
    const listed = await sbx.commands.list();
    assert.ok(listed.some((p) => p.pid === handle.pid), 'still running after the disconnect');
    const seen = [];
    const again = await sbx.commands.connect(handle.pid, { onStdout: (d) => seen.push(d) });
    const result = await again.wait();
    assert.equal(result.exitCode, 0);
    assert.ok(seen.join('').includes('n6\n'), seen.join(''));
  });

  test('Connect-Timeout-Ms ends the process, not only the stream', async () => {
    const sbx = await create();
    await assert.rejects(sbx.commands.run('sleep 30', { timeoutMs: 1000 }));
    await new Promise((r) => setTimeout(r, 500));
    const listed = await sbx.commands.list();
    assert.ok(!listed.some((p) => p.cmd === '/bin/bash'), JSON.stringify(listed));
  });

  test('a sandbox destroyed under a stream ends it; later calls get 502', async () => {
    const sbx = await create();
    const handle = await sbx.commands.run('sleep 30', { background: true });
    const waited = handle.wait().then(() => 'ended', (e) => e);
    await Sandbox.kill(sbx.sandboxId, opts);
    const outcome = await Promise.race([waited, new Promise((r) => setTimeout(() => r('hung'), 15000))]);
    assert.notEqual(outcome, 'hung');
    const res = await request(envd + '/process.Process/List', { headers: headers(sbx), body: Buffer.from('{}') });
    assert.equal(res.status, 502);
    assert.equal(await sbx.isRunning(), false);
    await alive();
  });

  test('output of a sandbox given a secret is redacted, streamed or not', async () => {
    const canary = 'canary-' + Math.random().toString(36).slice(2) + Math.random().toString(36).slice(2);
    const d = await startDaemon({
      env: { CORRAL_SECRET_CANARY: canary },
      config: 'serve:\n  secrets:\n    env_prefix: CORRAL_SECRET_\n  e2b:\n    network: none\n' +
              '    templates:\n      secretive: {secrets: [{name: canary, mode: env, env_var: CANARY}]}\n' +
              'sandbox:\n  disk_limit: 256Mi\n  memory_limit: 512Mi\n',
    });
    try {
      const o = { apiKey: d.apiKey, apiUrl: d.url + '/e2b', sandboxUrl: d.url + '/e2b/envd' };
      const sbx = await Sandbox.create('secretive', o);
      const r = await sbx.commands.run('echo "$CANARY"; echo "x$CANARY" >&2; test -n "$CANARY"');
      assert.ok(!r.stdout.includes(canary) && !r.stderr.includes(canary), r.stdout + r.stderr);
      assert.match(r.stdout, /REDACTED/);
      const chunks = [];
      const h = await sbx.commands.run('for i in 1 2; do printf %s "$CANARY" | head -c 9; sleep 0.2; printf "%s\\n" "${CANARY#???????? ?}"; done; echo "$CANARY"',
                                       { background: true, onStdout: (c) => chunks.push(c) });
      await h.wait();
      assert.ok(!chunks.join('').includes(canary), chunks.join(''));
      await sbx.commands.run('touch "/tmp/$CANARY"');
      const names = (await sbx.files.list('/tmp')).map((e) => e.name).join(' ');
      assert.ok(!names.includes(canary), names);
      await sbx.kill();
    } finally {
      await d.stop();
    }
  });

  test('paths stay inside the sandbox; secrets files are not served', async () => {
    const sbx = await create();
    await sbx.commands.run('ln -s / /tmp/up; ln -s /proc/1/root /tmp/init-root');
    // An escape through a symlink resolves inside the sandbox's own root.
    const hostname = await sbx.files.read('/tmp/up/etc/hostname');
    const inside = (await sbx.commands.run('cat /etc/hostname')).stdout;
    assert.equal(hostname, inside);
    // ".." is refused outright, never resolved.
    await assert.rejects(sbx.files.read('/../../../../etc/hostname'), (e) => e instanceof InvalidArgumentError);
    await assert.rejects(sbx.files.read('/tmp/init-root/etc/hostname'));
    await assert.rejects(sbx.files.list('/proc/self'));
    await alive();
  });
});
