// Starts a real `corral serve` on a temp data dir, socket and loopback port
// for the tests of this folder, and stops it (and removes what it made).
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export function corralBin() {
  const bin = process.env.CORRAL_BIN;
  if (!bin) throw new Error('CORRAL_BIN is not set (the ctest entry sets it)');
  return bin;
}

// Resolves to {url, apiKey, dataDir, stop()} once the daemon listens.
export async function startDaemon({ config, env } = {}) {
  const dir = mkdtempSync(join(tmpdir(), 'corral-e2b-test-'));
  const args = ['serve', '--data-dir', join(dir, 'data'), '--socket', join(dir, 'corral.sock'),
                '--listen', '127.0.0.1:0'];
  if (config) {
    const { writeFileSync } = await import('node:fs');
    writeFileSync(join(dir, 'serve.yaml'), config);
    args.push('--config', join(dir, 'serve.yaml'));
  }
  const proc = spawn(corralBin(), args, { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...env } });
  const output = [];
  const url = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('corral serve did not start:\n' + output.join(''))), 60000);
    const onData = (chunk) => {
      output.push(chunk.toString());
      const m = /listening on (http:\/\/127\.0\.0\.1:\d+)/.exec(output.join(''));
      if (m) {
        clearTimeout(timer);
        resolve(m[1]);
      }
    };
    proc.stdout.on('data', onData);
    proc.stderr.on('data', (c) => output.push(c.toString()));
    proc.on('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`corral serve exited (${code}):\n` + output.join('')));
    });
  });
  proc.removeAllListeners('exit');
  const apiKey = readFileSync(join(dir, 'data', 'api-key'), 'utf8').trim();
  return {
    url,
    apiKey,
    dataDir: join(dir, 'data'),
    pid: proc.pid,
    output,
    async stop() {
      if (proc.exitCode === null) {
        const done = new Promise((r) => proc.once('exit', r));
        proc.kill('SIGTERM');
        await done;
      }
      rmSync(dir, { recursive: true, force: true });
    },
    kill9() { proc.kill('SIGKILL'); },
  };
}

// Whether this machine can run the suite; prints why not. Under
// CORRAL_MUST_WORK=1 a missing piece is a failure, not a skip.
export function canRun(what) {
  const missing = [];
  if (process.getuid && process.getuid() !== 0) missing.push('root (the daemon makes sandboxes)');
  if (!process.env.CORRAL_BIN) missing.push('CORRAL_BIN');
  if (missing.length === 0) return true;
  const why = `${what}: skipped: needs ${missing.join(', ')}`;
  if (process.env.CORRAL_MUST_WORK === '1') throw new Error(why + ' (CORRAL_MUST_WORK=1)');
  console.log(why);
  return false;
}
