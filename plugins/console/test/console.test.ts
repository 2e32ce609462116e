/**
 * The kernel's static site (`ctx.site`) as the console plugin uses it, on the wire: security headers, caching,
 * precompressed files, single-page fallback, what it refuses to serve, and the switches that turn it off.
 */
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { gzipSync, brotliCompressSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { REPO_ROOT, startAgent, type TestAgent } from '../../../test/helpers/agent.js';

const SECOND_SITE = resolve(REPO_ROOT, 'plugins/console/test/fixtures/second-site');
const INDEX = '<!doctype html><title>site</title><script type="module" src="/assets/app-1234.js"></script>';
const SCRIPT = 'console.log("app");'.repeat(50);

describe('web console site (ctx.site)', () => {
  let agent: TestAgent;
  let work: string;
  let site: string;
  const get = (path: string, headers: Record<string, string> = {}, method = 'GET') => fetch(new URL(path, agent.url), { method, headers, redirect: 'manual' });

  beforeAll(async () => {
    work = mkdtempSync(join(tmpdir(), 'agent-site-'));
    site = join(work, 'site');
    mkdirSync(join(site, 'assets'), { recursive: true });
    writeFileSync(join(site, 'index.html'), INDEX);
    writeFileSync(join(site, 'assets', 'app-1234.js'), SCRIPT);
    writeFileSync(join(site, 'assets', 'app-1234.js.gz'), gzipSync(SCRIPT));
    writeFileSync(join(site, 'assets', 'app-1234.js.br'), brotliCompressSync(SCRIPT));
    writeFileSync(join(work, 'secret.txt'), 'not for the web');
    // A link inside the folder to a file outside it.
    symlinkSync(join(work, 'secret.txt'), join(site, 'assets', 'leak.txt'));
    agent = await startAgent({ plugins: ['console', SECOND_SITE], config: { console: { path: site } } });
  });
  afterAll(async () => {
    await agent?.stop();
    rmSync(work, { recursive: true, force: true });
  });

  it('answers / with the page and the security headers, never cached without revalidation', async () => {
    const res = await get('/');
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('text/html; charset=utf-8');
    expect(await res.text()).toBe(INDEX);
    const csp = res.headers.get('content-security-policy')!;
    for (const directive of [
      "default-src 'none'",
      "script-src 'self'",
      "style-src 'self'",
      "connect-src 'self'",
      "frame-ancestors 'none'",
      "base-uri 'none'",
    ]) {
      expect(csp).toContain(directive);
    }
    expect(csp).not.toContain('unsafe');
    expect(res.headers.get('x-content-type-options')).toBe('nosniff');
    expect(res.headers.get('referrer-policy')).toBe('no-referrer');
    expect(res.headers.get('x-frame-options')).toBe('DENY');
    expect(res.headers.get('cache-control')).toBe('no-cache');
    const etag = res.headers.get('etag')!;
    expect(etag).toBeTruthy();
    // As a browser revalidates (fetch would add `cache-control: no-cache` to a request with if-none-match, which
    // asks for a full answer).
    const again = await get('/', { 'if-none-match': etag, 'cache-control': 'max-age=0' });
    expect(again.status).toBe(304);
  });

  it('serves hashed assets as immutable, precompressed as the client accepts', async () => {
    const br = await get('/assets/app-1234.js', { 'accept-encoding': 'gzip, br' });
    expect(br.headers.get('cache-control')).toBe('public, max-age=31536000, immutable');
    expect(br.headers.get('content-encoding')).toBe('br');
    expect(br.headers.get('content-type')).toBe('text/javascript; charset=utf-8');
    expect(br.headers.get('vary')).toContain('Accept-Encoding');
    expect(await br.text()).toBe(SCRIPT);
    const gz = await get('/assets/app-1234.js', { 'accept-encoding': 'gzip' });
    expect(gz.headers.get('content-encoding')).toBe('gzip');
    expect(await gz.text()).toBe(SCRIPT);
    const plain = await get('/assets/app-1234.js', { 'accept-encoding': 'identity' });
    expect(plain.headers.get('content-encoding')).toBeNull();
    expect(Number(plain.headers.get('content-length'))).toBe(SCRIPT.length);
    const head = await get('/assets/app-1234.js', { 'accept-encoding': 'identity' }, 'HEAD');
    expect(head.status).toBe(200);
    expect(Number(head.headers.get('content-length'))).toBe(SCRIPT.length);
  });

  it("answers the page for the app's own routes, 404 for missing files, and leaves /api alone", async () => {
    const route = await get('/deployments/web');
    expect(route.status).toBe(200);
    expect(await route.text()).toBe(INDEX);
    expect((await get('/assets/app-9999.js')).status).toBe(404);
    expect((await get('/favicon.ico')).status).toBe(404);
    const api = await get('/api/no-such-route');
    expect(api.status).toBe(404);
    expect(((await api.json()) as { code: string }).code).toBe('NOT_FOUND');
    expect(api.headers.get('content-security-policy')).toBeNull();
    expect((await get('/api/health')).status).toBe(200);
    // Only reads: a POST to a page is the kernel's JSON 404.
    expect((await get('/', {}, 'POST')).status).toBe(404);
  });

  it('serves nothing outside its folder: no .. (encoded or not), no link that leads out', async () => {
    for (const path of ['/../secret.txt', '/%2e%2e/secret.txt', '/assets/%2e%2e/%2e%2e/secret.txt', '/assets/..%2f..%2fsecret.txt', '/assets/leak.txt']) {
      const res = await get(path);
      expect(await res.text(), path).not.toContain('not for the web');
    }
    expect((await get('/assets/leak.txt')).status).toBe(404);
  });

  it('refuses a second plugin that asks to serve the site', async () => {
    const plugins = (await agent.api('GET', '/plugins')).body.data;
    const second = plugins.find((p: any) => p.name === 'second-site');
    expect(second.status).toBe('failed');
    expect(second.error).toContain("already served by plugin 'console'");
  });

  it('is off with console.enabled: false (and without a build)', async () => {
    const off = await startAgent({ plugins: ['console'], config: { console: { enabled: false, path: site } } });
    const missing = await startAgent({ plugins: ['console'], config: { console: { path: join(work, 'nothing-built') } } });
    try {
      expect((await fetch(new URL('/', off.url))).status).toBe(404);
      expect((await fetch(new URL('/', missing.url))).status).toBe(404);
      expect(missing.output()).toContain('the web console is not built');
    } finally {
      await off.stop();
      await missing.stop();
    }
  });
});
