// Proxy benchmark against real nginx and a real container: time from POST /api/deployments/:name/domains to the
// first 200 proxied by nginx for that host (render → nginx -t → swap → reload → new workers), per round.
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync, chmodSync } from 'node:fs';
import { request } from 'node:http';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { agentApi, fmt, freePort, percentile, sleep, startAgent } from './_lib.mjs';

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 10);
const NGINX = '/usr/sbin/nginx';
const hit = (port, host) =>
  new Promise((resolve) => {
    const req = request({ host: '127.0.0.1', port, path: '/', headers: { host }, agent: false }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode));
    });
    req.on('error', () => resolve(0));
    req.end();
  });

const prefix = mkdtempSync(join(tmpdir(), 'edge-bench-nginx-'));
chmodSync(prefix, 0o755);
for (const d of ['logs', 'tmp', 'agent']) mkdirSync(join(prefix, d), { recursive: true });
const [httpPort, httpsPort] = [await freePort(), await freePort()];
const conf = join(prefix, 'nginx.conf');
writeFileSync(
  conf,
  `${process.getuid() === 0 ? 'user www-data www-data;' : ''}
worker_processes 1;
pid ${prefix}/nginx.pid;
error_log ${prefix}/logs/error.log;
events { worker_connections 512; }
http {
  access_log off;
  ${['client_body', 'proxy', 'fastcgi', 'uwsgi', 'scgi'].map((t) => `${t}_temp_path ${prefix}/tmp/${t};`).join('\n  ')}
  server_names_hash_bucket_size 128;
  include ${prefix}/agent/agent.conf;
}
`,
);
writeFileSync(join(prefix, 'agent', 'agent.conf'), '');
const base = ['-p', prefix, '-c', conf, '-e', join(prefix, 'logs', 'error.log')];
const nginx = spawn(NGINX, [...base, '-g', 'daemon off;'], { stdio: 'ignore' });
for (let i = 0; i < 100; i++) {
  try {
    if (readFileSync(join(prefix, 'nginx.pid'), 'utf8').trim()) break;
  } catch {
    /* not yet */
  }
  await sleep(50);
}

const agent = await startAgent({
  plugins: ['docker', 'deployments', 'edge'],
  config: {
    proxy: {
      config_dir: join(prefix, 'agent'),
      test_command: [NGINX, ...base, '-t', '-q'],
      reload_command: [NGINX, ...base, '-s', 'reload'],
      http_port: httpPort,
      https_port: httpsPort,
      listen_address: '127.0.0.1',
      access_log: join(prefix, 'logs', 'access.log'),
      error_log: join(prefix, 'logs', 'error.log'),
    },
  },
});
const { request: api } = await agentApi(agent);
const name = `benchproxy${Math.random().toString(16).slice(2, 8)}`;
try {
  const created = await api('POST', '/deployments', {
    name,
    auto_start: true,
    compose_content:
      'services:\n  web:\n    image: agent-test/busybox:latest\n    command: ["httpd", "-f", "-p", "80", "-h", "/www"]\n    stop_signal: SIGKILL\n    labels:\n      agent.test: "1"\n',
  });
  if (created.status !== 201 || created.body.data.start_error) throw new Error(`deployment: ${JSON.stringify(created.body)}`);
  const total = [];
  const posts = [];
  for (let r = 0; r < ROUNDS; r++) {
    const host = `r${r}.${name}.example.test`;
    const t0 = performance.now();
    const res = await api('POST', `/deployments/${name}/domains`, { service: 'web', domain: host, container_port: 80 });
    const tPost = performance.now();
    if (res.status !== 201) throw new Error(`POST domains: ${res.status} ${JSON.stringify(res.body)}`);
    let status = 0;
    while ((status = await hit(httpPort, host)) !== 200) {
      if (performance.now() - t0 > 30_000) throw new Error(`no 200 for ${host} (last ${status})`);
      await sleep(2);
    }
    total.push(performance.now() - t0);
    posts.push(tPost - t0);
    await api('DELETE', `/deployments/${name}/domains/${res.body.data.id}`);
  }
  total.sort((a, b) => a - b);
  posts.sort((a, b) => a - b);
  console.log(`POST /api/deployments/:name/domains → first proxied 200 through nginx, ${ROUNDS} rounds (load average ${loadavg()[0].toFixed(1)}):`);
  console.log(`  total   p50 ${fmt(percentile(total, 50), 0)} ms   max ${fmt(total.at(-1), 0)} ms`);
  console.log(
    `  of which the POST itself (render, nginx -t, reload, wait for the new workers): p50 ${fmt(percentile(posts, 50), 0)} ms (${fmt((percentile(posts, 50) / percentile(total, 50)) * 100, 0)}% of the total)`,
  );
} finally {
  await api('DELETE', `/deployments/${name}?remove_files=true`).catch(() => undefined);
  await agent.stop();
  nginx.kill('SIGQUIT');
  await new Promise((r) => nginx.once('exit', r));
  rmSync(prefix, { recursive: true, force: true });
}
