/**
 * The web console in a real browser: Debian's Chromium driven by playwright-core (no browser download), against
 * the real agent with every built-in plugin. It signs in with the keyboard, deploys a template through its plan,
 * follows its logs live, adds a domain, makes a backup, creates and revokes an API key, finds the revocation in the
 * audit, sees metric charts, and checks that a user scoped to another deployment sees nothing of the first. Every
 * screen is screenshotted (.test-env/console/*.png) and checked with axe-core (no serious or critical violation).
 * Figures (first screen, 1,000-deployment list, JS size, agent memory) go to .test-env/console/figures.json.
 */
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createRequire } from 'node:module';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { REPO_ROOT, scratchProxy, startAgent, type TestAgent } from './helpers/agent.js';
import { cleanupDocker, runId, until } from '../plugins/deployments/test/helpers.js';
import { serveManyDeployments, timeListPaint } from './helpers/console-list.mjs';

/**
 * The page's globals, for the functions given to page.evaluate (they run in the browser): the tests are compiled
 * with Node's types only, whose fetch the DOM library's would clash with.
 */
declare const window: { axe: { run(node: unknown, options: unknown): Promise<{ violations: any[] }> } };
declare const document: {
  querySelector(selector: string): { click(): void; textContent: string | null } | null;
  activeElement: { textContent: string | null } | null;
  querySelectorAll(selector: string): { length: number; [Symbol.iterator](): Iterator<{ click(): void; textContent: string | null }> };
};
declare const sessionStorage: { getItem(key: string): string | null };
declare function requestAnimationFrame(fn: () => void): number;

const CHROMIUM = '/usr/bin/chromium';
const ARTIFACTS = join(REPO_ROOT, '.test-env', 'console');
const AXE = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');
const figures: Record<string, unknown> = {};
const pageErrors: string[] = [];

/** A template that runs on the local test image only (the shipped ones pull from registries). */
const TEMPLATE_COMPOSE = `services:
  web:
    image: agent-test/busybox:latest
    command: ["sh", "-c", "echo web-started; exec httpd -f -v -p 80 -h /www"]
    stop_signal: SIGKILL
    labels:
      agent.test: "1"
  worker:
    image: agent-test/busybox:latest
    command: ["sh", "-c", "i=0; while true; do echo tick-$$i \${GREETING}; i=$$((i+1)); sleep 0.3; done"]
    stop_signal: SIGKILL
    labels:
      agent.test: "1"
`;

describe('web console in Chromium', () => {
  let agent: TestAgent;
  let browser: Browser;
  let context: BrowserContext;
  let page: Page;
  let work: string;
  const app = `t${runId}-app`;
  const other = `t${runId}-other`;

  const shot = (name: string, p: Page = page) => p.screenshot({ path: join(ARTIFACTS, `${name}.png`), fullPage: true });

  /** axe-core in the page: serious and critical violations fail the test, with what and where. */
  async function axe(name: string, p: Page = page) {
    // Evaluated through the debugging protocol: the page's CSP (rightly) refuses an injected inline script.
    if (!(await p.evaluate(() => 'axe' in window))) await p.evaluate(AXE);
    const result = await p.evaluate(async () => {
      const r = await window.axe.run(document, { resultTypes: ['violations'] });
      return r.violations.map((v: any) => ({ id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.slice(0, 3).map((n: any) => n.target.join(' ')) }));
    });
    const bad = result.filter((v: any) => v.impact === 'serious' || v.impact === 'critical');
    expect(bad, `${name}: ${JSON.stringify(bad, null, 1)}`).toEqual([]);
  }

  async function screen(path: string, name: string, ready: string) {
    await page.goto(new URL(path, agent.url).href);
    await page.locator(ready).first().waitFor({ timeout: 15_000 });
    // The screen with its data, not its placeholders.
    await expect.poll(() => page.getByText('Loading…').count(), { timeout: 30_000 }).toBe(0);
    await shot(name);
    await axe(name);
  }

  beforeAll(async () => {
    if (!existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} is missing: test/env/up.sh installs it (Debian package chromium, test/env/packages.d/console.txt)`);
    rmSync(ARTIFACTS, { recursive: true, force: true });
    mkdirSync(ARTIFACTS, { recursive: true });
    work = mkdtempSync(join(tmpdir(), 'agent-console-'));
    const templates = join(work, 'templates');
    mkdirSync(join(templates, 'hello'), { recursive: true });
    writeFileSync(join(templates, 'hello', 'docker-compose.yml'), TEMPLATE_COMPOSE);
    writeFileSync(
      join(templates, 'hello', 'template.json'),
      JSON.stringify({
        id: 'hello',
        name: 'Hello worker',
        description: 'A web server and a worker that logs',
        category: 'web',
        tags: ['test'],
        env: [{ key: 'GREETING', description: 'what the worker says', default: 'hello', secret: false }],
      }),
    );
    cpSync(join(REPO_ROOT, 'plugins', 'deployments', 'templates', 'static-site'), join(templates, 'static-site'), { recursive: true });
    agent = await startAgent({
      plugins: ['*'],
      config: { proxy: scratchProxy(join(work, 'proxy')), templates: { path: templates }, deployments: { path: join(work, 'deployments') } },
    });
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: [
        '--headless',
        '--no-sandbox',
        '--disable-gpu',
        '--disable-quic',
        '--no-first-run',
        '--disable-background-networking',
        '--disable-component-update',
        '--disable-sync',
      ],
    });
    context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    context.setDefaultTimeout(15_000);
    page = await context.newPage();
    page.on('dialog', (d) => void d.accept());
    // Anything the CSP blocked (an inline style a library injects, say) or a script error fails the run at the end.
    page.on('console', (m) => {
      if (m.type() === 'error' && /Content Security Policy|Uncaught/.test(m.text())) pageErrors.push(m.text());
    });
    page.on('pageerror', (e) => pageErrors.push(String(e)));
  });

  // What the page showed when a step failed, beside the other screenshots.
  afterEach(async (ctx) => {
    if (ctx.task.result?.state === 'fail' && page) await shot(`failed-${ctx.task.name.replace(/[^a-z0-9]+/gi, '-').slice(0, 60)}`).catch(() => undefined);
  });

  afterAll(async () => {
    writeFileSync(join(ARTIFACTS, 'figures.json'), JSON.stringify(figures, null, 2) + '\n');
    await browser?.close();
    await agent?.stop();
    await cleanupDocker();
    rmSync(work, { recursive: true, force: true });
  });

  it('serves the console at / with its security headers, and the API beside it', async () => {
    const res = await fetch(new URL('/', agent.url));
    expect(res.status).toBe(200);
    const csp = res.headers.get('content-security-policy')!;
    expect(csp).toContain("script-src 'self'");
    expect(csp).not.toMatch(/script-src[^;]*unsafe/);
    expect(csp).toContain("style-src 'self';");
    expect(csp).toContain("frame-ancestors 'none'");
    expect(res.headers.get('x-content-type-options')).toBe('nosniff');
    expect(res.headers.get('referrer-policy')).toBe('no-referrer');
    expect(res.headers.get('cache-control')).toBe('no-cache');
    const html = await res.text();
    const script = /src="(\/assets\/[^"]+\.js)"/.exec(html)![1]!;
    const asset = await fetch(new URL(script, agent.url), { headers: { 'accept-encoding': 'gzip' } });
    expect(asset.headers.get('cache-control')).toBe('public, max-age=31536000, immutable');
    expect(asset.headers.get('content-encoding')).toBe('gzip');
    // A route of the single-page app answers index.html; a missing asset and anything under /api do not.
    expect((await fetch(new URL(`/deployments/${app}`, agent.url))).headers.get('content-type')).toContain('text/html');
    expect((await fetch(new URL('/assets/missing-0000.js', agent.url))).status).toBe(404);
    expect((await fetch(new URL('/api/nothing-here', agent.url))).status).toBe(404);
    expect((await fetch(new URL('/%2e%2e/%2e%2e/etc/passwd', agent.url))).headers.get('content-type')).toContain('text/html');
    const build = JSON.parse(readFileSync(join(REPO_ROOT, 'console', 'dist', 'build.json'), 'utf8'));
    figures.initial_js_css_gzip_kb = +(build.initial_gzip_bytes / 1024).toFixed(1);
    expect(build.initial_gzip_bytes).toBeLessThan(200 * 1024);
    // The editor is in a chunk of its own, not in what the first screen loads.
    expect(build.initial.some((f: string) => f.startsWith('editor-'))).toBe(false);
  });

  it('signs in with the keyboard alone, and keeps the token out of URLs and cookies', async () => {
    const started = Date.now();
    await page.goto(agent.url);
    await page.locator('#username').waitFor();
    // A figure (figures.json, README), not an assertion: this suite runs files side by side on two cores, and a
    // time measured under that load says more about the load than about the console.
    figures.first_screen_ms = Date.now() - started;
    await shot('login');
    await axe('login');
    await page.locator('#username').focus();
    await page.keyboard.type('admin');
    await page.keyboard.press('Tab');
    await page.keyboard.type('Admin-Test-Pass-1');
    await page.keyboard.press('Enter');
    await page.getByRole('heading', { name: 'Overview' }).waitFor();
    expect(await context.cookies()).toEqual([]);
    expect(page.url()).not.toContain('token');
    expect(await page.evaluate(() => sessionStorage.getItem('agent.token'))).toMatch(/^ey/);
  });

  it('deploys a template: the plan shows the compose file as a diff, and applying it creates the deployment', async () => {
    await page.getByRole('link', { name: 'Templates' }).click();
    await page.getByRole('button', { name: 'Deploy Hello worker' }).click();
    await page.locator('#deploy-name').fill(app);
    await page.locator('#env-GREETING').fill('from-the-console');
    await shot('templates-deploy');
    await page.getByRole('button', { name: 'Preview the plan' }).click();
    const dialog = page.getByRole('dialog', { name: 'Review the plan' });
    await dialog.waitFor();
    await expect.poll(() => dialog.locator('.diff').first().textContent()).toContain('agent-test/busybox');
    await shot('plan-review');
    await axe('plan-review');
    // Nothing exists before the plan is applied.
    expect((await agent.api('GET', `/deployments/${app}`)).status).toBe(404);
    await dialog.getByRole('button', { name: 'Apply' }).click();
    await page.getByRole('heading', { name: app }).waitFor({ timeout: 60_000 });
    await until(
      () => agent.api('GET', `/deployments/${app}`),
      (r) => r.body?.data?.status === 'running',
      60_000,
    );
    const plans = await agent.api('GET', '/plans');
    expect(plans.body.data.find((p: any) => p.resource?.id === app)?.status).toBe('applied');
  });

  it('follows the logs live over the websocket, with a filter', async () => {
    await page.goto(new URL(`/deployments/${app}?tab=logs`, agent.url).href);
    const lines = page.locator('.log-line');
    await expect.poll(() => lines.count(), { timeout: 30_000 }).toBeGreaterThan(3);
    const before = await lines.count();
    // New lines arrive without a reload (the worker logs every 0.3 s).
    await expect.poll(() => lines.count(), { timeout: 10_000 }).toBeGreaterThan(before);
    await expect.poll(() => page.locator('.logs').textContent()).toContain('from-the-console');
    await shot('deployment-logs');
    await axe('deployment-logs');
    await page.locator('#log-filter').fill('tick-1');
    await page.getByRole('button', { name: 'Apply' }).click();
    await expect.poll(async () => (await lines.allTextContents()).length, { timeout: 15_000 }).toBeGreaterThan(0);
    const texts = await lines.allTextContents();
    expect(texts.every((t) => t.includes('tick-1'))).toBe(true);
  });

  it('adds a domain through its plan', async () => {
    await page.goto(new URL(`/deployments/${app}?tab=domains`, agent.url).href);
    await page.getByRole('button', { name: 'Add a domain' }).click();
    await page.locator('#form-domains-add-domain').fill(`${app}.example.test`);
    await page.getByRole('button', { name: 'Preview the plan' }).click();
    const dialog = page.getByRole('dialog', { name: 'Review the plan' });
    await dialog.getByRole('button', { name: 'Apply' }).click();
    // In the deployment's list once applied (the plan's vhost diff names it too, in the dialog).
    await page
      .getByRole('tabpanel')
      .getByRole('cell', { name: `${app}.example.test`, exact: true })
      .waitFor({ timeout: 30_000 });
    const domains = await agent.api('GET', `/deployments/${app}/domains`);
    expect(domains.body.data.map((d: any) => d.domain)).toContain(`${app}.example.test`);
    await shot('deployment-domains');
    await axe('deployment-domains');
  });

  it('makes a backup', async () => {
    await page.goto(new URL(`/deployments/${app}?tab=backups`, agent.url).href);
    await page.getByRole('button', { name: 'Back up now' }).click();
    await expect
      .poll(async () => (await agent.api('GET', `/deployments/${app}/backups`)).body.data.map((b: any) => b.status), { timeout: 60_000 })
      .toContain('completed');
    await page.getByRole('button', { name: 'Restore…' }).first().waitFor({ timeout: 15_000 });
    await shot('deployment-backups');
    await axe('deployment-backups');
  });

  it('shows every tab of the deployment, and the compose editor saves through a plan diff', async () => {
    for (const tab of ['services', 'stats', 'env', 'revisions', 'jobs', 'access']) {
      await page.goto(new URL(`/deployments/${app}?tab=${tab}`, agent.url).href);
      await page.locator(`#panel-${tab}`).waitFor();
      await page.waitForLoadState('networkidle');
      await expect.poll(() => page.getByText('Loading…').count(), { timeout: 30_000 }).toBe(0);
      await shot(`deployment-${tab}`);
      await axe(`deployment-${tab}`);
    }
    await page.goto(new URL(`/deployments/${app}?tab=compose`, agent.url).href);
    await page.locator('.editor[data-ready="yes"] .cm-content').waitFor();
    await page.locator('.cm-content').click();
    await page.keyboard.press('Control+End');
    await page.keyboard.type('\n# reviewed in the console\n');
    await page.getByRole('button', { name: 'Save: review the plan' }).click();
    const dialog = page.getByRole('dialog', { name: 'Review the plan' });
    await dialog.waitFor({ timeout: 30_000 });
    await expect
      .poll(() => dialog.locator('tr.add').allTextContents(), { timeout: 15_000 })
      .toEqual(expect.arrayContaining([expect.stringContaining('+# reviewed in the console')]));
    await shot('deployment-compose-plan');
    await dialog.getByRole('button', { name: 'Discard' }).click();
    await dialog.waitFor({ state: 'detached' });
    expect((await agent.api('GET', `/deployments/${app}`)).body.data.compose_content).not.toContain('reviewed in the console');
  });

  it('redeploys as a job through its plan, and shows the job with its output', async () => {
    await page.goto(new URL(`/deployments/${app}?tab=services`, agent.url).href);
    // The tabs by keyboard: arrows move between them (one tab stop for the list).
    await page.getByRole('tab', { name: 'Services' }).focus();
    await page.keyboard.press('ArrowRight');
    await expect.poll(() => page.getByRole('tab', { name: 'Logs' }).getAttribute('aria-selected')).toBe('true');
    await page.keyboard.press('End');
    await expect.poll(() => page.getByRole('tab', { name: 'Access' }).getAttribute('aria-selected')).toBe('true');
    await page.getByRole('button', { name: 'Redeploy' }).click();
    const form = page.getByRole('dialog', { name: 'Redeploy' });
    await form.getByRole('textbox', { name: 'reason' }).fill('from the console test');
    await form.getByRole('button', { name: 'Preview the plan' }).click();
    const plan = page.getByRole('dialog', { name: 'Review the plan' });
    await plan.getByRole('button', { name: 'Apply' }).click();
    await page.getByRole('tab', { name: 'Jobs', selected: true }).waitFor({ timeout: 30_000 });
    const jobs = await until(
      () => agent.api('GET', '/jobs', { query: { deployment: app } }),
      (r) => r.body.data.some((j: any) => j.kind === 'deployment.redeploy' && j.status === 'succeeded'),
      60_000,
    );
    const job = jobs.body.data.find((j: any) => j.kind === 'deployment.redeploy');
    expect(job.status).toBe('succeeded');
    await page.getByRole('button', { name: 'Output' }).first().click();
    const dialog = page.getByRole('dialog', { name: `Job ${job.id}` });
    await dialog.getByText('succeeded').waitFor({ timeout: 30_000 });
    await expect.poll(async () => ((await dialog.getByRole('log').textContent()) ?? '').length, { timeout: 15_000 }).toBeGreaterThan(0);
    await shot('deployment-job');
    await axe('deployment-job');
    await page.keyboard.press('Escape');
    await dialog.waitFor({ state: 'detached' });
  });

  it('creates an API key shown once, revokes it, and finds the revocation in the audit', async () => {
    await page.getByRole('link', { name: 'Users & keys' }).click();
    // By keyboard: focus the button, Enter opens the form, Enter in the field submits.
    await page.getByRole('heading', { name: 'Users and API keys' }).waitFor();
    await expect.poll(() => page.getByText('Loading…').count()).toBe(0);
    await page.getByRole('button', { name: 'New API key' }).focus();
    await expect.poll(() => page.evaluate(() => document.activeElement?.textContent)).toBe('New API key');
    await page.keyboard.press('Enter');
    await page.getByRole('dialog', { name: 'New API key' }).waitFor();
    await page.locator('#form-apikeys-create-name').focus();
    await page.keyboard.type('console-key');
    await page.keyboard.press('Enter');
    const shown = page.getByRole('dialog', { name: 'Your new API key' });
    const key = (await shown.locator('pre').textContent())!.trim();
    const keyId = (await agent.api('GET', '/apikeys')).body.data.find((k: any) => k.name === 'console-key').id;
    expect(key).toMatch(/^agk_/);
    expect((await fetch(new URL('/api/auth/validate', agent.url), { headers: { authorization: `Bearer ${key}` } })).status).toBe(200);
    await shot('users-key-once');
    await page.keyboard.press('Escape');
    await shown.waitFor({ state: 'detached' });
    expect(await page.locator('body').textContent()).not.toContain(key);
    await page.getByRole('button', { name: 'Revoke console-key' }).click();
    await page.getByRole('cell', { name: 'revoked' }).waitFor();
    expect((await fetch(new URL('/api/auth/validate', agent.url), { headers: { authorization: `Bearer ${key}` } })).status).toBe(401);
    await shot('users');
    await axe('users');

    await page.getByRole('link', { name: 'Audit' }).click();
    await page.locator('#audit-action').fill('apikeys.revoke');
    await page.getByRole('button', { name: 'Search' }).click();
    // One revocation in this agent's life: the filtered page holds it and nothing else.
    await page.getByRole('heading', { name: 'Events (1)' }).waitFor();
    await expect.poll(() => page.locator('tbody tr td:nth-child(3)').allTextContents()).toEqual(['apikeys.revoke']);
    expect(await page.locator('tbody tr td:nth-child(4)').textContent()).toBe(`apikeys ${keyId}`);
    await shot('audit');
    await axe('audit');
  });

  it('draws metric charts (uPlot) from the observability app', async () => {
    await page.getByRole('link', { name: 'Observability' }).click();
    const host = page.getByRole('region', { name: 'Host' });
    await host.locator('.chart canvas').first().waitFor();
    await page.locator('#obs-deployment').selectOption(app);
    // The deployment's own series (the collector samples every few seconds): a line needs two points.
    const charts = page.getByRole('region', { name: 'Deployment metrics' });
    await expect
      .poll(async () => Number((await charts.locator('.chart [data-points]').first().getAttribute('data-points')) ?? 0), { timeout: 60_000, interval: 2000 })
      .toBeGreaterThan(1);
    await charts.locator('.chart canvas').first().waitFor();
    expect(await charts.locator('.chart figcaption').allTextContents()).toEqual(expect.arrayContaining(['CPU', 'Memory']));
    await shot('observability');
    await axe('observability');
  });

  it('shows the other screens', async () => {
    const screens: [string, string, string][] = [
      ['/', 'overview', 'h1:text("Overview")'],
      ['/plans', 'plans', 'h1:text("Plans")'],
      ['/templates', 'templates', 'h1:text("Templates")'],
      ['/security', 'security', 'h1:text("Security")'],
      ['/traffic', 'traffic', 'h1:text("Traffic")'],
      ['/dashboards', 'dashboards', 'h1:text("Dashboards")'],
      ['/settings', 'settings', 'h1:text("Settings")'],
      ['/doctor', 'doctor', 'td'],
    ];
    for (const [path, name, ready] of screens) await screen(path, name, ready);
    await page.goto(new URL('/plans', agent.url).href);
    await page
      .getByRole('row', { name: new RegExp(`create deployment ${app}`) })
      .getByRole('button', { name: 'Review' })
      .click();
    await page.locator('.diff').first().waitFor();
    await shot('plans-review');
  });

  it('a user scoped to another deployment sees nothing of this one and no global screen', async () => {
    const created = await agent.api('POST', '/deployments', {
      body: { name: other, compose_content: 'services:\n  a:\n    image: agent-test/busybox:latest\n    labels:\n      agent.test: "1"\n' },
    });
    expect(created.status).toBe(201);
    const user = await agent.api('POST', '/users', {
      body: { username: `tenant${runId}`, email: `tenant${runId}@example.test`, password: 'Tenant-Pass-123', role: 'operator' },
    });
    expect(user.status).toBe(201);
    expect((await agent.api('POST', `/users/${user.body.data.id}/deployments`, { body: { deployment_name: other, access_level: 'write' } })).status).toBe(201);

    const tenant = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    const p = await tenant.newPage();
    await p.goto(agent.url);
    await p.locator('#username').fill(`tenant${runId}`);
    await p.locator('#password').fill('Tenant-Pass-123');
    await p.getByRole('button', { name: 'Sign in' }).click();
    await p.getByRole('heading', { name: 'Overview' }).waitFor();
    await p.getByRole('link', { name: other }).waitFor();
    const body = (await p.locator('main').textContent())!;
    expect(body).not.toContain(app);
    const nav = await p.getByRole('navigation').textContent();
    for (const global of ['Templates', 'Security', 'Traffic', 'Settings', 'Doctor', 'Observability']) expect(nav).not.toContain(global);
    await shot('tenant-overview', p);
    await axe('tenant-overview', p);
    // The other tenant's deployment page, asked for by URL: the agent answers 404 and nothing of it shows.
    await p.goto(new URL(`/deployments/${app}`, agent.url).href);
    await p.locator('.error').waitFor();
    expect(await p.locator('.error').textContent()).toContain('NOT_FOUND');
    await p.goto(new URL('/settings', agent.url).href);
    await p.getByRole('heading', { name: 'Not here' }).waitFor();
    await p.goto(new URL('/audit', agent.url).href);
    await p.locator('h2:has-text("Events")').waitFor();
    await p.waitForLoadState('networkidle');
    expect(await p.locator('main').textContent()).not.toContain(app);
    await shot('tenant-audit', p);
    await tenant.close();

    // The same user's API key (scoped to its deployment) signs in too, and reaches no more.
    const tenantToken = await agent.login(`tenant${runId}`, 'Tenant-Pass-123');
    const key = (await agent.api('POST', '/apikeys', { token: tenantToken, body: { name: 'tenant-key' } })).body.data.key as string;
    const keyed = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    const k = await keyed.newPage();
    await k.goto(agent.url);
    await k.getByRole('radio', { name: 'an API key' }).check();
    await k.locator('#api_key').fill(key);
    await k.getByRole('button', { name: 'Sign in' }).click();
    await k.getByRole('link', { name: other }).waitFor();
    expect(await k.locator('main').textContent()).not.toContain(app);
    expect(await k.evaluate(() => sessionStorage.getItem('agent.token'))).not.toBe(key);
    await shot('tenant-api-key', k);
    await keyed.close();
  });

  it('shows a list of 1,000 deployments: the first 100 rows and the count, every row on request (timed, as a figure)', async () => {
    // The list as the agent answers it, 1,000 times over (creating 1,000 real deployments would take minutes):
    // this measures the console's rendering; the API's own cost is measured by the benchmarks.
    const real = (await agent.api('GET', '/deployments')).body.data[0];
    await serveManyDeployments(page, real);
    const { total, render } = await timeListPaint(page, agent.url);
    // From the click to the painted list, and from the last byte of the answer (which the test's interception
    // delays) to the painted list.
    figures.list_1000_total_ms = Math.round(total);
    figures.list_1000_render_ms = Math.round(render);
    // Every row on request.
    const all = await page.evaluate(async () => {
      const started = performance.now();
      [...document.querySelectorAll('button')].find((b) => b.textContent === 'Show all')!.click();
      await new Promise<void>((resolve) => {
        const check = () => (document.querySelectorAll('tbody tr').length >= 1000 ? resolve() : requestAnimationFrame(check));
        check();
      });
      await new Promise((r) => requestAnimationFrame(() => setTimeout(r, 0)));
      return performance.now() - started;
    });
    figures.list_1000_show_all_ms = Math.round(all);
    await page.unroute('**/api/deployments');
  });

  it('ran without a script error or anything the CSP blocked', () => {
    expect(pageErrors).toEqual([]);
  });

  it("keeps the agent's memory low with the console open", async () => {
    const status = readFileSync(`/proc/${agent.process.pid}/status`, 'utf8');
    const rssMb = Number(/VmRSS:\s+(\d+)/.exec(status)![1]) / 1024;
    figures.agent_rss_mb = Math.round(rssMb);
    // The processes the agent runs (the observability app) are counted apart: they are there with or without the
    // console.
    const children = readFileSync(`/proc/${agent.process.pid}/task/${agent.process.pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean);
    figures.agent_children_rss_mb = Math.round(
      children.reduce((sum, pid) => {
        try {
          return sum + Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]) / 1024;
        } catch {
          return sum;
        }
      }, 0),
    );
    expect(rssMb).toBeLessThan(150);
  });
});
