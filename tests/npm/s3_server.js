// A real S3-compatible server on loopback for corral's object-store tests
// (tests/integration/s3_object_store_test.cc): @20minutes/s3rver, which
// verifies SigV4 signatures against its one key pair (S3RVER / S3RVER).
// Usage: node s3_server.js DIR BUCKET; prints "PORT <n>" once it listens on
// 127.0.0.1, and exits when its stdin closes (the test died or is done).
'use strict';
const S3rver = require('@20minutes/s3rver');

const [directory, bucket] = process.argv.slice(2);
if (!directory || !bucket) {
  console.error('usage: node s3_server.js DIR BUCKET');
  process.exit(2);
}
const server = new S3rver({
  address: '127.0.0.1',
  port: 0,
  silent: true,
  directory,
  vhostBuckets: false,
  configureBuckets: [{ name: bucket }],
});
server.run().then(
  (address) => console.log(`PORT ${address.port}`),
  (err) => {
    console.error(`s3_server: ${err.message}`);
    process.exit(1);
  },
);
process.stdin.on('end', () => process.exit(0));
process.stdin.resume();
