// One scenario two ways from one Node process, alternating round by round:
// create a sandbox, run `echo`, write and read back a 1 MiB file, kill it;
// through the unmodified e2b SDK against corral's E2B facade, and through
// corral's own API (fetch, the same HTTP client undici the SDK uses).
// Prints p50/p90 of each, the facade's ratio (issue 17: at most 1.2), and
// create -> first command output through the SDK.
import { createRequire } from 'node:module';
import { randomBytes } from 'node:crypto';

const require = createRequire(process.env.NODE_PATH + '/');
const { Sandbox } = await import(require.resolve('e2b'));

const url = process.env.CORRAL_URL;
const key = process.env.CORRAL_KEY;
const rounds = Number(process.argv[process.argv.indexOf('--rounds') + 1] || 30) || 30;
const e2bOpts = { apiKey: key, apiUrl: url + '/e2b', sandboxUrl: url + '/e2b/envd' };
const payload = randomBytes(1 << 20);
const auth = { authorization: 'Bearer ' + key };

async function viaSdk() {
  const t0 = performance.now();
  const sbx = await Sandbox.create(e2bOpts);
  const r = await sbx.commands.run('echo hi');
  const first = performance.now() - t0;
  if (r.stdout !== 'hi\n') throw new Error('echo: ' + r.stdout);
  await sbx.files.write('/tmp/blob', payload.buffer.slice(payload.byteOffset, payload.byteOffset + payload.length));
  const back = await sbx.files.read('/tmp/blob', { format: 'bytes' });
  if (Buffer.compare(Buffer.from(back), payload) !== 0) throw new Error('read back differs');
  await sbx.kill();
  return { total: performance.now() - t0, first };
}

async function call(method, path, body, headers = {}) {
  const res = await fetch(url + path, { method, headers: { ...auth, ...headers }, body });
  if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${await res.text()}`);
  return res;
}

async function viaCorral() {
  const t0 = performance.now();
  const created = await (await call('POST', '/v1/sandboxes', JSON.stringify({ max_lifetime: 300 }),
                                    { 'content-type': 'application/json' })).json();
  const id = created.id;
  const ex = await (await call('POST', `/v1/sandboxes/${id}/exec`, JSON.stringify({ cmd: 'echo hi' }),
                               { 'content-type': 'application/json' })).json();
  const first = performance.now() - t0;
  if (ex.stdout !== 'hi\n') throw new Error('echo: ' + JSON.stringify(ex));
  await call('PUT', `/v1/sandboxes/${id}/files?path=/tmp/blob`, payload);
  const back = Buffer.from(await (await call('GET', `/v1/sandboxes/${id}/files?path=/tmp/blob`)).arrayBuffer());
  if (Buffer.compare(back, payload) !== 0) throw new Error('read back differs');
  await call('DELETE', `/v1/sandboxes/${id}`);
  return { total: performance.now() - t0, first };
}

const pct = (xs, p) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(p * (s.length - 1) + 0.5))];
};

// Warm both paths (first connections, page cache) before measuring.
await viaSdk();
await viaCorral();
const sdk = [];
const own = [];
for (let i = 0; i < rounds; ++i) {
  if (i % 2 === 0) {
    sdk.push(await viaSdk());
    own.push(await viaCorral());
  } else {
    own.push(await viaCorral());
    sdk.push(await viaSdk());
  }
}
const f = (x) => x.toFixed(1).padStart(7);
const row = (name, xs, pick) => {
  const v = xs.map(pick);
  console.log(`${name.padEnd(38)} p50 ${f(pct(v, 0.5))} ms   p90 ${f(pct(v, 0.9))} ms`);
};
console.log(`rounds: ${rounds} each, alternating`);
row('scenario, corral API (fetch)', own, (r) => r.total);
row('scenario, e2b SDK -> facade', sdk, (r) => r.total);
row('create -> first output, corral API', own, (r) => r.first);
row('create -> first output, e2b SDK', sdk, (r) => r.first);
const ratio = pct(sdk.map((r) => r.total), 0.5) / pct(own.map((r) => r.total), 0.5);
console.log(`facade / own API (p50 of the scenario): ${ratio.toFixed(3)}x (target <= 1.20)`);
