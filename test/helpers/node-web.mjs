// A small web application image for redeploy tests and benchmarks, built on this host without any registry: the
// host's node binary and the libraries it links (ldd), on agent-test/busybox (wget and sh for healthchecks).
// The application answers `/` with the version baked into the image, `/health` with 200 (500 in an image built
// `unhealthy`), `/slow?ms=N` after N ms; it accepts websockets (a text frame with its version on open) and on
// SIGTERM closes them cleanly (1001) and finishes the requests in progress before it exits.
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

export const APP = `'use strict';
const http = require('http');
const fs = require('fs');
const crypto = require('crypto');
const version = fs.readFileSync('/version', 'utf8').trim();
const unhealthy = fs.existsSync('/unhealthy');
const sockets = new Set();
const server = http.createServer((req, res) => {
  const url = new URL(req.url, 'http://x');
  if (url.pathname === '/health') {
    res.writeHead(unhealthy ? 500 : 200, { 'content-type': 'text/plain' });
    return res.end(unhealthy ? 'unhealthy' : 'ok');
  }
  const answer = () => {
    res.writeHead(200, { 'content-type': 'text/plain', 'x-version': version });
    res.end(version);
  };
  if (url.pathname === '/slow') return setTimeout(answer, Number(url.searchParams.get('ms') || 1000));
  answer();
});
const frame = (opcode, payload) => Buffer.concat([Buffer.from([0x80 | opcode, payload.length]), payload]);
server.on('upgrade', (req, socket) => {
  const accept = crypto.createHash('sha1').update(req.headers['sec-websocket-key'] + '258EAFA5-E914-47DA-95CA-C5AB0DC85B11').digest('base64');
  socket.write('HTTP/1.1 101 Switching Protocols\\r\\nUpgrade: websocket\\r\\nConnection: Upgrade\\r\\nSec-WebSocket-Accept: ' + accept + '\\r\\n\\r\\n');
  socket.write(frame(1, Buffer.from(version)));
  sockets.add(socket);
  socket.on('data', (d) => {
    // A close from the client: answered, then the connection ends.
    if ((d[0] & 0x0f) === 8) socket.end(frame(8, Buffer.from([0x03, 0xe8])));
  });
  socket.on('error', () => undefined);
  socket.on('close', () => sockets.delete(socket));
});
process.on('SIGTERM', () => {
  for (const s of sockets) s.end(frame(8, Buffer.from([0x03, 0xe9])));
  server.close(() => process.exit(0));
  setTimeout(() => process.exit(0), 10000).unref();
});
server.keepAliveTimeout = 1000;
server.listen(80);
`;

/** The base image (node and the application), built once per application text and node binary. */
export async function nodeWebBase() {
  const node = process.execPath;
  const tag = `agent-test/node-web:${createHash('sha256')
    .update(APP)
    .update(node)
    .update(String(readFileSync(node).length))
    .digest('hex')
    .slice(0, 12)}`;
  const exists = await run('docker', ['image', 'inspect', tag]).then(
    () => true,
    () => false,
  );
  if (exists) return tag;
  const dir = mkdtempSync(join(tmpdir(), 'node-web-'));
  try {
    const { stdout } = await run('ldd', [node]);
    const libs = [...stdout.matchAll(/(\/\S+\.so[^\s]*)/g)].map((m) => m[1]);
    for (const file of [node, ...libs]) {
      const to = join(dir, 'root', file);
      mkdirSync(dirname(to), { recursive: true });
      copyFileSync(file, to);
    }
    writeFileSync(join(dir, 'root', 'app.js'), APP);
    writeFileSync(join(dir, 'Dockerfile'), `FROM agent-test/busybox:latest\nCOPY root/ /\nLABEL agent.test=1\nCMD ["${node}", "/app.js"]\n`);
    await run('docker', ['build', '-q', '-t', tag, dir], { maxBuffer: 1 << 24 });
    return tag;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** An image of the application answering `version` under `tag` (a new image id each call); resolves with its id. */
export async function nodeWebImage(tag, version, { unhealthy = false } = {}) {
  const base = await nodeWebBase();
  const dockerfile = `FROM ${base}\nRUN echo ${version} > /version${unhealthy ? ' && touch /unhealthy' : ''}\nLABEL agent.test=1\n`;
  const dir = mkdtempSync(join(tmpdir(), 'node-web-'));
  try {
    writeFileSync(join(dir, 'Dockerfile'), dockerfile);
    await run('docker', ['build', '-q', '-t', tag, dir]);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  return (await run('docker', ['image', 'inspect', '-f', '{{.Id}}', tag])).stdout.trim();
}

/** A compose file of one service `web` running the image, with a healthcheck unless `healthcheck: false`. */
export function nodeWebCompose(image, { healthcheck = true, extra = '' } = {}) {
  return `services:
  web:
    image: ${image}
    labels:
      agent.test: "1"
${
  healthcheck
    ? `    healthcheck:
      test: ["CMD", "wget", "-q", "-O", "/dev/null", "http://127.0.0.1/health"]
      interval: 1s
      timeout: 2s
      retries: 2
`
    : ''
}${extra}`;
}
