// `npm run bench -- console-screens`: the web console's two timed budgets, in Debian's Chromium (playwright-core,
// no browser download) against the real agent with every plugin, on a quiet machine:
//   first screen: from navigation to the sign-in form, each run in a fresh browser context (nothing cached);
//   1,000 deployments: from the click on the overview to the painted list (its first 100 rows and the count), and
//   from the last byte of the answer to that paint. The list is one real deployment's entry 1,000 times over,
//   served by the browser's own interception (creating 1,000 deployments would measure the engine, not the console).
// Goals (README, console figures): first screen < 1 s; the list < 500 ms from the answer.
import { existsSync, mkdtempSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium } from 'playwright-core';
import { serveManyDeployments, timeListPaint } from '../test/helpers/console-list.mjs';
import { ADMIN_PASSWORD, agentApi, fmt, median, percentile, removeProjectContainers, scratchEdge, startAgent } from './_lib.mjs';

const CHROMIUM = '/usr/bin/chromium';
const RUNS = Number(process.env.CONSOLE_SCREENS_RUNS ?? 20);
if (!existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} is missing: test/env/up.sh installs it (Debian package chromium)`);

const agent = await startAgent({ config: scratchEdge(mkdtempSync(join(tmpdir(), 'bench-console-'))) });
const api = await agentApi(agent);
const name = `bcs${process.pid.toString(36)}`;
const compose =
  'services:\n  web:\n    image: agent-test/busybox:latest\n    command: ["httpd", "-f", "-p", "8080", "-h", "/tmp"]\n    stop_signal: SIGKILL\n    labels:\n      agent.test: "1"\n';
const browser = await chromium.launch({
  executablePath: CHROMIUM,
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
});
const firstScreen = [];
const listRender = [];
const listTotal = [];
try {
  console.log(`# console screens (${RUNS} runs each, Chromium headless, load average ${loadavg()[0].toFixed(2)})`);
  await api('POST', '/deployments', { name, compose_content: compose }, 201);
  const real = (await api('GET', '/deployments')).data.find((d) => d.name === name);

  for (let i = 0; i < RUNS; i++) {
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    const page = await context.newPage();
    const started = Date.now();
    await page.goto(agent.url);
    await page.locator('#username').waitFor();
    firstScreen.push(Date.now() - started);
    await context.close();
  }

  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  const page = await context.newPage();
  await page.goto(agent.url);
  await page.locator('#username').fill('admin');
  await page.locator('#password').fill(ADMIN_PASSWORD);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.locator('h2').first().waitFor();
  await serveManyDeployments(page, real);
  for (let i = 0; i < RUNS; i++) {
    const { total, render } = await timeListPaint(page, agent.url);
    listTotal.push(total);
    listRender.push(render);
  }
  await context.close();
} finally {
  await browser.close();
  await api.request('DELETE', `/deployments/${name}?remove_files=true`).catch(() => undefined);
  await agent.stop();
  removeProjectContainers(name);
}

const ok = (good) => (good ? 'OK' : 'BELOW GOAL');
const p95 = (xs) =>
  percentile(
    [...xs].sort((a, b) => a - b),
    95,
  );
console.log(
  `first screen (navigation to the sign-in form): median ${fmt(median(firstScreen), 0)} ms, p95 ${fmt(p95(firstScreen), 0)} ms (goal < 1000 ms) ${ok(p95(firstScreen) < 1000)}`,
);
console.log(
  `1,000 deployments, answer to painted list: median ${fmt(median(listRender), 0)} ms, p95 ${fmt(p95(listRender), 0)} ms (goal < 500 ms) ${ok(p95(listRender) < 500)}; click to painted list: median ${fmt(median(listTotal), 0)} ms`,
);
