// One scenario two ways from one Node process, alternating round by round:
// create a sandbox, run `echo`, write and read back a 1 MiB file, kill it;
// through the unmodified e2b SDK against corral's E2B facade, and through
// corral's own API (fetch, the same HTTP client undici the SDK uses). Both
// run the same command: what the SDK's commands.run sends, a login bash
// (`/bin/bash -l -c 'echo hi'`, ~10 ms of its own for the profile scripts).
// Prints p50/p90 of each, the facade's ratio (issue 17: at most 1.2), and
// create -> first command output through the SDK. Each scenario's time is
// also split (undici's diagnostics channel, which both Node's fetch and the
// SDK's undici publish to) into time with a request in flight (the daemon,
// loopback, the HTTP client) and time with none (the client's own work:
// the SDK's wrappers, FormData and Blob streaming, JSON and base64), and
// the client's garbage collection in each scenario is reported too.
import { createRequire } from 'node:module';
import { randomBytes } from 'node:crypto';
import dc from 'node:diagnostics_channel';
import { PerformanceObserver } from 'node:perf_hooks';

const require = createRequire(process.env.NODE_PATH + '/');
const { Sandbox } = await import(require.resolve('e2b'));

const url = process.env.CORRAL_URL;
const key = process.env.CORRAL_KEY;
const rounds = Number(process.argv[process.argv.indexOf('--rounds') + 1] || 30) || 30;
const e2bOpts = { apiKey: key, apiUrl: url + '/e2b', sandboxUrl: url + '/e2b/envd' };
const payload = randomBytes(1 << 20);
const auth = { authorization: 'Bearer ' + key };

// Time with at least one request in flight, since the last reset.
const inflight = { n: 0, since: 0, ms: 0 };
dc.subscribe('undici:request:create', () => {
  if (inflight.n++ === 0) inflight.since = performance.now();
});
const requestDone = () => {
  if (inflight.n > 0 && --inflight.n === 0) inflight.ms += performance.now() - inflight.since;
};
dc.subscribe('undici:request:trailers', requestDone);
dc.subscribe('undici:request:error', requestDone);
function inRequests() {
  const ms = inflight.ms + (inflight.n > 0 ? performance.now() - inflight.since : 0);
  inflight.ms = 0;
  if (inflight.n > 0) inflight.since = performance.now();
  return ms;
}

// The client's garbage-collection pauses, since the last reset.
const gc = { ms: 0 };
new PerformanceObserver((list) => {
  for (const e of list.getEntries()) gc.ms += e.duration;
}).observe({ entryTypes: ['gc'] });
// Observers hear of a pause a turn of the event loop later: let that turn
// pass (outside the timed part) before reading.
async function inGc() {
  await new Promise((resolve) => setImmediate(resolve));
  await new Promise((resolve) => setTimeout(resolve, 1));
  const ms = gc.ms;
  gc.ms = 0;
  return ms;
}

// Each step's time goes into `steps` (name -> ms).
function stepper() {
  const steps = {};
  let last = performance.now();
  return {
    steps,
    mark(name) {
      const now = performance.now();
      steps[name] = now - last;
      last = now;
    },
  };
}

async function viaSdk() {
  const s = stepper();
  inRequests();
  await inGc();
  const t0 = performance.now();
  const sbx = await Sandbox.create(e2bOpts);
  s.mark('create');
  const r = await sbx.commands.run('echo hi');
  s.mark('run');
  const first = performance.now() - t0;
  if (r.stdout !== 'hi\n') throw new Error('echo: ' + r.stdout);
  await sbx.files.write('/tmp/blob', payload.buffer.slice(payload.byteOffset, payload.byteOffset + payload.length));
  s.mark('write');
  const back = await sbx.files.read('/tmp/blob', { format: 'bytes' });
  s.mark('read');
  if (Buffer.compare(Buffer.from(back), payload) !== 0) throw new Error('read back differs');
  await sbx.kill();
  s.mark('kill');
  const total = performance.now() - t0;
  return { total, first, steps: s.steps, requests: inRequests(), gc: await inGc() };
}

async function call(method, path, body, headers = {}) {
  const res = await fetch(url + path, { method, headers: { ...auth, ...headers }, body });
  if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${await res.text()}`);
  return res;
}

async function viaCorral() {
  const s = stepper();
  inRequests();
  await inGc();
  const t0 = performance.now();
  const created = await (await call('POST', '/v1/sandboxes', JSON.stringify({ max_lifetime: 300 }),
                                    { 'content-type': 'application/json' })).json();
  s.mark('create');
  const id = created.id;
  const ex = await (await call('POST', `/v1/sandboxes/${id}/exec`, JSON.stringify({ argv: ['/bin/bash', '-l', '-c', 'echo hi'] }),
                               { 'content-type': 'application/json' })).json();
  s.mark('run');
  const first = performance.now() - t0;
  if (ex.stdout !== 'hi\n') throw new Error('echo: ' + JSON.stringify(ex));
  await call('PUT', `/v1/sandboxes/${id}/files?path=/tmp/blob`, payload);
  s.mark('write');
  const back = Buffer.from(await (await call('GET', `/v1/sandboxes/${id}/files?path=/tmp/blob`)).arrayBuffer());
  s.mark('read');
  if (Buffer.compare(back, payload) !== 0) throw new Error('read back differs');
  await call('DELETE', `/v1/sandboxes/${id}`);
  s.mark('kill');
  const total = performance.now() - t0;
  return { total, first, steps: s.steps, requests: inRequests(), gc: await inGc() };
}

// The SDK's requests made by hand with fetch: the facade's own cost,
// without the SDK's client-side work.
function envelope(obj) {
  const msg = Buffer.from(JSON.stringify(obj));
  const head = Buffer.alloc(5);
  head.writeUInt32BE(msg.length, 1);
  return Buffer.concat([head, msg]);
}

async function viaProtocol() {
  const s = stepper();
  inRequests();
  await inGc();
  const t0 = performance.now();
  const created = await (await call('POST', '/e2b/v2/sandboxes', JSON.stringify({ templateID: 'base', timeout: 300 }),
                                    { 'content-type': 'application/json', 'x-api-key': key })).json();
  s.mark('create');
  const envd = { 'e2b-sandbox-id': created.sandboxID, 'x-access-token': created.envdAccessToken };
  const events = Buffer.from(await (await call('POST', '/e2b/envd/process.Process/Start',
      envelope({ process: { cmd: '/bin/bash', args: ['-l', '-c', 'echo hi'] }, stdin: false }),
      { ...envd, 'content-type': 'application/connect+json' })).arrayBuffer());
  s.mark('run');
  const first = performance.now() - t0;
  if (!events.includes(Buffer.from('"stdout":"aGkK"'))) throw new Error('echo: ' + events.toString());
  const form = new FormData();
  form.append('file', new Blob([payload]), '/tmp/blob');
  await call('POST', '/e2b/envd/files?path=%2Ftmp%2Fblob', form, envd);
  s.mark('write');
  const back = Buffer.from(await (await call('GET', '/e2b/envd/files?path=%2Ftmp%2Fblob', undefined, envd)).arrayBuffer());
  s.mark('read');
  if (Buffer.compare(back, payload) !== 0) throw new Error('read back differs');
  await call('DELETE', '/e2b/sandboxes/' + created.sandboxID, undefined, { 'x-api-key': key });
  s.mark('kill');
  const total = performance.now() - t0;
  return { total, first, steps: s.steps, requests: inRequests(), gc: await inGc() };
}

const pct = (xs, p) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(p * (s.length - 1) + 0.5))];
};

// Warm both paths (first connections, page cache) before measuring.
await viaSdk();
await viaCorral();
await viaProtocol();
const sdk = [];
const own = [];
const proto = [];
const order = [[sdk, viaSdk], [own, viaCorral], [proto, viaProtocol]];
for (let i = 0; i < rounds; ++i) {
  // A different order each round: none always runs right after another.
  for (let j = 0; j < 3; ++j) {
    const [list, run] = order[(i + j) % 3];
    list.push(await run());
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
row('scenario, E2B protocol by fetch', proto, (r) => r.total);
row('create -> first output, corral API', own, (r) => r.first);
row('create -> first output, e2b SDK', sdk, (r) => r.first);
for (const step of ['create', 'run', 'write', 'read', 'kill']) {
  const a = pct(own.map((r) => r.steps[step]), 0.5);
  const b = pct(sdk.map((r) => r.steps[step]), 0.5);
  const c = pct(proto.map((r) => r.steps[step]), 0.5);
  console.log(`  step ${step.padEnd(7)} p50: corral API ${f(a)} ms, e2b SDK ${f(b)} ms, E2B protocol by fetch ${f(c)} ms`);
}
for (const [name, xs] of [['corral API', own], ['e2b SDK', sdk], ['E2B protocol by fetch', proto]]) {
  const req = pct(xs.map((r) => r.requests), 0.5);
  const client = pct(xs.map((r) => r.total - r.requests), 0.5);
  const pauses = pct(xs.map((r) => r.gc), 0.5);
  console.log(`  ${name.padEnd(22)} p50: ${f(req)} ms with a request in flight, ${f(client)} ms in the client alone, ${f(pauses)} ms in its GC`);
}
const inFlight = pct(sdk.map((r) => r.requests), 0.5) / pct(own.map((r) => r.requests), 0.5);
console.log(`requests in flight, e2b SDK / corral API (p50): ${inFlight.toFixed(3)}x (daemon + loopback + HTTP client)`);
const ratio = pct(sdk.map((r) => r.total), 0.5) / pct(own.map((r) => r.total), 0.5);
console.log(`facade / own API (p50 of the scenario): ${ratio.toFixed(3)}x (target <= 1.20)`);
const protoRatio = pct(proto.map((r) => r.total), 0.5) / pct(own.map((r) => r.total), 0.5);
console.log(`E2B protocol by fetch / own API: ${protoRatio.toFixed(3)}x (the facade alone, no SDK)`);
