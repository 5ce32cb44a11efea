// An https front for corral's E2B facade, laid out as a hosted
// E2B-compatible service is (E2B's "domain mode"), for the E2B provider's
// tests (tests/integration/sdk_e2b_provider_test.cc):
//   https://api.<domain>            -> UPSTREAM/e2b           (the control plane)
//   https://49983-<id>.<domain>     -> UPSTREAM/e2b/envd      (envd of sandbox <id>)
// HTTP/2 or HTTP/1.1 (ALPN), the certificate CERT/KEY. envd is routed by the
// host name alone: the E2b-Sandbox-Id header the client sent is replaced by
// the id in the host, so a client that builds the wrong host reaches the
// wrong sandbox or none. Any other host is 421.
// With ENVD_VERSION set, the control plane's answers report that envdVersion
// (to drive a client down the paths of an older envd).
// Usage: node tls_front.js CERT KEY UPSTREAM DOMAIN; prints "PORT <n>" once it
// listens on 127.0.0.1, and exits when its stdin closes.
'use strict';
const fs = require('node:fs');
const http = require('node:http');
const http2 = require('node:http2');

const [certFile, keyFile, upstream, domain] = process.argv.slice(2);
if (!certFile || !keyFile || !upstream || !domain) {
  console.error('usage: node tls_front.js CERT KEY UPSTREAM DOMAIN');
  process.exit(2);
}
const up = new URL(upstream);
const envdVersion = process.env.ENVD_VERSION || '';
// Connection-specific headers: not forwarded either way (HTTP/2 forbids them).
const hop = new Set(['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'upgrade',
  'host', 'te', 'http2-settings']);
const agent = new http.Agent({ keepAlive: true });

function route(host) {
  if (host === `api.${domain}`) return { prefix: '/e2b' };
  const m = /^49983-([A-Za-z0-9-]+)\.(.+)$/.exec(host);
  if (m && m[2] === domain) return { prefix: '/e2b/envd', sandbox: m[1] };
  return null;
}

const server = http2.createSecureServer({
  cert: fs.readFileSync(certFile),
  key: fs.readFileSync(keyFile),
  allowHTTP1: true,
}, (req, res) => {
  const authority = req.headers[':authority'] || req.headers.host || '';
  const target = route(authority.replace(/:\d+$/, ''));
  if (!target) {
    res.writeHead(421, { 'content-type': 'text/plain' });
    res.end(`no service at ${authority}\n`);
    return;
  }
  const headers = {};
  for (const [k, v] of Object.entries(req.headers)) {
    if (!k.startsWith(':') && !hop.has(k)) headers[k] = v;
  }
  if (target.sandbox) headers['e2b-sandbox-id'] = target.sandbox;
  const out = http.request({
    host: up.hostname, port: up.port, method: req.method, path: target.prefix + req.url, headers, agent,
  }, (answer) => {
    const h = {};
    for (const [k, v] of Object.entries(answer.headers)) if (!hop.has(k)) h[k] = v;
    if (envdVersion && !target.sandbox && /json/.test(answer.headers['content-type'] || '')) {
      const parts = [];
      answer.on('data', (d) => parts.push(d));
      answer.on('end', () => {
        const body = Buffer.concat(parts).toString()
          .replace(/"envdVersion":"[^"]*"/g, `"envdVersion":"${envdVersion}"`);
        delete h['content-length'];
        res.writeHead(answer.statusCode, h);
        res.end(body);
      });
      return;
    }
    res.writeHead(answer.statusCode, h);
    answer.pipe(res);
  });
  out.on('error', (e) => {
    if (!res.headersSent) res.writeHead(502, { 'content-type': 'text/plain' });
    res.end(`upstream: ${e.message}\n`);
  });
  req.pipe(out);
});

server.listen(0, '127.0.0.1', () => console.log(`PORT ${server.address().port}`));
process.stdin.on('end', () => process.exit(0));
process.stdin.resume();
