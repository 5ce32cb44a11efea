// The e2b SDK in E2B's domain mode, as an application uses a hosted service:
// only E2B_DOMAIN and E2B_API_KEY are set (NODE_EXTRA_CA_CERTS trusts the
// test's certificate). Run by e2b_domain.test.mjs as a child process, since
// Node reads NODE_EXTRA_CA_CERTS only when it starts. Prints one JSON line of
// what the SDK returned.
import dns from 'node:dns';
import { createHash, randomBytes } from 'node:crypto';

// *.sbx.localhost is loopback for this process only (the system resolver
// does not know the name; the test must not edit /etc/hosts).
const lookup = dns.lookup;
dns.lookup = function (host, options, callback) {
  if (typeof host === 'string' && host.endsWith('.sbx.localhost')) host = '127.0.0.1';
  return lookup.call(this, host, options, callback);
};
const { Sandbox } = await import('e2b');

const out = {};
const sbx = await Sandbox.create({ envs: { STAGE: 'hosted' }, metadata: { mode: 'domain' }, requestTimeoutMs: 30000 });
out.id = sbx.sandboxId;
const r = await sbx.commands.run('echo "stage=$STAGE"; echo warn >&2');
out.stdout = r.stdout;
out.stderr = r.stderr;
const seen = [];
const started = Date.now();
const handle = await sbx.commands.run('echo t1; sleep 0.6; echo t2', {
  background: true,
  onStdout: (d) => seen.push({ d, at: Date.now() - started }),
});
const done = await handle.wait();
out.background = { exit: done.exitCode, seen, endedAt: Date.now() - started };
const blob = randomBytes(1 << 20);
await sbx.files.write('/tmp/blob', blob);
const back = Buffer.from(await sbx.files.read('/tmp/blob', { format: 'bytes' }));
out.bytes = { sent: createHash('sha256').update(blob).digest('hex'), back: createHash('sha256').update(back).digest('hex') };
out.host = sbx.getHost(8080);
const page = await Sandbox.list({ query: { metadata: { mode: 'domain' } } }).nextItems();
out.listed = page.map((s) => s.sandboxId);
await sbx.kill();
out.runningAfterKill = await sbx.isRunning();
console.log(JSON.stringify(out));
