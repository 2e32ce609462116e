import { X509Certificate } from 'node:crypto';
import { statSync } from 'node:fs';
import { request as httpsRequest } from 'node:https';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startAgent, type TestAgent } from '../../../test/helpers/agent.js';
import { hit, startNginx, type TestNginx } from './helpers/nginx.js';
import { startPebble, type TestPebble } from './helpers/pebble.js';
import { waitFor } from './helpers/ports.js';
import { createDeployment, EDGE_PLUGINS, uniqueName } from './helpers/deployment.js';

/** GET over HTTPS to the test nginx with SNI `host`, trusting only pebble's root. */
function httpsGet(port: number, host: string, path: string, ca: string): Promise<{ status: number; body: string; cert: X509Certificate }> {
  return new Promise((resolve, reject) => {
    const req = httpsRequest({ host: '127.0.0.1', port, path, servername: host, headers: { host }, ca, agent: false }, (res) => {
      const cert = new X509Certificate((res.socket as import('node:tls').TLSSocket).getPeerCertificate().raw);
      let body = '';
      res.on('data', (c) => (body += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body, cert }));
    });
    req.on('error', reject);
    req.end();
  });
}

describe('edge: certificates from a real ACME server (pebble)', () => {
  let nginx: TestNginx;
  let pebble: TestPebble;
  let agent: TestAgent;
  const app = uniqueName('edge-tls');
  const host = `${app}.example.test`;
  const alias = `www.${host}`;

  beforeAll(async () => {
    nginx = await startNginx();
    pebble = await startPebble(nginx.httpPort);
    agent = await startAgent({
      plugins: EDGE_PLUGINS,
      config: {
        proxy: nginx.proxyConfig,
        certificates: { directory_url: pebble.directoryUrl, directory_ca_file: pebble.apiCaFile, email: 'ops@example.test' },
      },
    });
    await createDeployment(agent, app);
  });

  afterAll(async () => {
    await agent?.api('DELETE', `/deployments/${app}`, { query: { remove_files: true } }).catch(() => undefined);
    await agent?.stop();
    await pebble?.stop();
    await nginx?.stop();
  });

  it('enabling ssl on a domain obtains a certificate and switches the vhost to HTTPS', async () => {
    const res = await agent.api('POST', `/deployments/${app}/domains`, {
      body: { service: 'web', domain: host, container_port: 80, aliases: [alias], ssl: { enabled: true } },
    });
    expect(res.status, res.text).toBe(201);
    const root = await pebble.issuerRoot();
    const served = await waitFor(
      async () => {
        const r = await httpsGet(nginx.httpsPort, host, '/', root);
        return r.status === 200 && r;
      },
      'HTTPS with the issued certificate',
      30_000,
      250,
    );
    expect(served.body).toContain('hello from agent-test/busybox');
    expect(served.cert.subjectAltName).toContain(`DNS:${host}`);
    expect(served.cert.subjectAltName).toContain(`DNS:${alias}`);
    const viaAlias = await httpsGet(nginx.httpsPort, alias, '/', root);
    expect(viaAlias.status).toBe(200);
    // Port 80 redirects to HTTPS but still serves ACME challenges. (A reload is graceful: an old worker may
    // still take a connection on port 80 for a few milliseconds after the new ones serve 443.)
    const plain = await waitFor(
      async () => {
        const r = await hit(nginx.httpPort, host, '/x?y=1');
        return r.status === 301 && r;
      },
      'the HTTP → HTTPS redirect',
      5000,
      50,
    );
    expect(plain.status).toBe(301);
    expect(plain.headers.location).toBe(`https://${host}:${nginx.httpsPort}/x?y=1`);
    expect((await hit(nginx.httpPort, host, '/.well-known/acme-challenge/missing')).status).toBe(404);
    const env = await httpsGet(nginx.httpsPort, host, '/cgi-bin/env', root);
    expect(env.body).toContain('HTTP_X_FORWARDED_PROTO=https');

    const list = await agent.api('GET', '/certificates');
    expect(list.status, list.text).toBe(200);
    expect(list.body.data).toEqual([
      expect.objectContaining({
        domain: host,
        names: expect.arrayContaining([host, alias]),
        status: 'valid',
        auto_renew: true,
        deployment: app,
        last_error: null,
      }),
    ]);
    expect(list.body.data[0].days_left).toBeGreaterThan(30);
    expect(list.body.data[0].issuer).toMatch(/Pebble/i);
    const key = statSync(join(agent.dataDir, 'plugins', 'edge', 'certs', host, 'privkey.pem'));
    expect(key.mode & 0o777).toBe(0o600);
    const status = await agent.api('GET', `/proxy/status/${app}`);
    expect(status.body.data.domains[0]).toMatchObject({ https: true, certificate: { status: 'valid' } });
  });

  it('requests, renews and deletes certificates through the API', async () => {
    const other = `api.${host}`;
    const res = await agent.api('POST', '/certificates', { body: { domain: other } });
    expect(res.status, res.text).toBe(201);
    expect(res.body.data).toMatchObject({ domain: other, status: 'valid', deployment: null });
    const renew = await agent.api('POST', '/certificates/renew');
    expect(renew.status, renew.text).toBe(200);
    expect(renew.body.data).toEqual({ renewed: [], failed: [], checked: 2 });
    expect((await agent.api('POST', '/certificates', { body: { domain: 'bad;name.test' } })).status).toBe(400);
    expect((await agent.api('POST', '/certificates', { body: { domain: '../etc.test' } })).status).toBe(400);
    expect((await agent.api('DELETE', `/certificates/${other}`)).status).toBe(200);
    expect((await agent.api('DELETE', `/certificates/${other}`)).status).toBe(404);
    expect((await agent.api('GET', '/certificates')).body.data.map((c: { domain: string }) => c.domain)).toEqual([host]);
  });

  it('renews a certificate close to expiry', async () => {
    const before = (await agent.api('GET', '/certificates')).body.data[0];
    // Pebble certificates last ~5 years by default: make "close to expiry" cover them for this check.
    const renew = await agent.api('POST', '/certificates/renew', { query: { within_days: 100_000 } });
    expect(renew.status, renew.text).toBe(200);
    expect(renew.body.data.renewed).toEqual([host]);
    const after = (await agent.api('GET', '/certificates')).body.data[0];
    expect(after.not_before >= before.not_before).toBe(true);
    const served = await httpsGet(nginx.httpsPort, host, '/', await pebble.issuerRoot());
    expect(served.status).toBe(200);
  });
});
