// The unmodified e2b SDK in E2B's domain mode against corral behind an https
// front laid out as a hosted service (../tls_front.js): the control plane at
// https://api.<domain>, each sandbox's envd at https://49983-<id>.<domain>,
// routed by the host name alone. The application sets E2B_DOMAIN and
// E2B_API_KEY and nothing else (docs/e2b.md, "Domain mode").
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { canRun, startDaemon } from './daemon.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const run = canRun('e2b domain-mode suite');

function startFront(upstream, dir) {
  const cert = join(dir, 'cert.pem');
  const key = join(dir, 'key.pem');
  execFileSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256',
    '-nodes', '-days', '2', '-subj', '/CN=corral test front',
    '-addext', 'subjectAltName=DNS:api.sbx.localhost,DNS:*.sbx.localhost',
    '-keyout', key, '-out', cert], { stdio: 'ignore' });
  const proc = spawn(process.execPath, [join(here, '..', 'tls_front.js'), cert, key, upstream, 'sbx.localhost'],
    { stdio: ['pipe', 'pipe', 'inherit'] });
  return new Promise((resolve, reject) => {
    let text = '';
    proc.stdout.on('data', (c) => {
      text += c;
      const m = /^PORT (\d+)\n/.exec(text);
      if (m) resolve({ port: Number(m[1]), cert, stop: () => proc.stdin.end() });
    });
    proc.on('exit', (code) => reject(new Error(`tls_front.js exited (${code})`)));
  });
}

function runClient(env) {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [join(here, 'domain_client.mjs')], {
      env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'], cwd: join(here, '..'),
    });
    let out = '';
    let err = '';
    child.stdout.on('data', (c) => { out += c; });
    child.stderr.on('data', (c) => { err += c; });
    child.on('exit', (code) => resolve({ code, out, err }));
    child.on('error', reject);
  });
}

describe('e2b SDK in domain mode against corral behind https', { skip: !run }, () => {
  let daemon;
  let front;
  let dir;

  before(async () => {
    daemon = await startDaemon({
      config: 'serve:\n  e2b:\n    network: none\nsandbox:\n  disk_limit: 256Mi\n  memory_limit: 512Mi\n',
    });
    dir = mkdtempSync(join(tmpdir(), 'corral-e2b-domain-'));
    front = await startFront(daemon.url, dir);
  });

  after(async () => {
    front?.stop();
    if (daemon) await daemon.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  test('create, run, stream, files, getHost, list and kill with E2B_DOMAIN alone', async () => {
    const domain = `sbx.localhost:${front.port}`;
    const { code, out, err } = await runClient({
      E2B_DOMAIN: domain,
      E2B_API_KEY: daemon.apiKey.replace(/^crl_/, 'e2b_'),
      NODE_EXTRA_CA_CERTS: front.cert,
      E2B_API_URL: '', E2B_SANDBOX_URL: '', E2B_DEBUG: '',
    });
    assert.equal(code, 0, err);
    const r = JSON.parse(out.trim().split('\n').pop());
    assert.match(r.id, /^sb-/);
    assert.equal(r.stdout, 'stage=hosted\n');
    assert.equal(r.stderr, 'warn\n');
    assert.equal(r.background.exit, 0);
    assert.deepEqual(r.background.seen.map((s) => s.d), ['t1\n', 't2\n']);
    // t1 reached the application before the command ended (600 ms later).
    assert.ok(r.background.seen[0].at < r.background.endedAt - 300, JSON.stringify(r.background));
    assert.equal(r.bytes.back, r.bytes.sent);
    assert.equal(r.host, `8080-${r.id}.${domain}`);
    assert.deepEqual(r.listed, [r.id]);
    assert.equal(r.runningAfterKill, false);
  });

  test('without the CA the SDK refuses the service and nothing is made', async () => {
    const { code, err } = await runClient({
      E2B_DOMAIN: `sbx.localhost:${front.port}`,
      E2B_API_KEY: daemon.apiKey,
      NODE_EXTRA_CA_CERTS: '', E2B_API_URL: '', E2B_SANDBOX_URL: '', E2B_DEBUG: '',
    });
    assert.notEqual(code, 0);
    assert.match(err, /certificate|self.signed|UNABLE_TO_VERIFY|fetch failed/i);
    const res = await fetch(daemon.url + '/v1/sandboxes', { headers: { authorization: `Bearer ${daemon.apiKey}` } });
    const body = await res.json();
    const live = (body.sandboxes ?? body).filter((s) => s.state !== 'cleaned');
    assert.deepEqual(live, []);
  });
});
