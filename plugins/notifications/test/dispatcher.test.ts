// The dispatcher's retries (p-retry) against a local HTTP server: backoff, failures retrying cannot mend, a stop
// during the wait, failures that are not the delivery's own.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Logger, SqlDatabase } from '@agent/sdk';
import { Dispatcher, type DeliveryRecord, type Target } from '../src/dispatcher.js';

/** Answers each path's listed statuses in turn (200 once they are used up) and records when it was asked. */
const answers = new Map<string, number[]>();
const hits: { path: string; at: number }[] = [];
let server: Server;
let base = '';

beforeAll(async () => {
  server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      hits.push({ path: req.url ?? '', at: performance.now() });
      res.statusCode = answers.get(req.url ?? '')?.shift() ?? 200;
      res.end();
    });
  });
  await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
  base = `generic+http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(() => new Promise<void>((done) => server.close(() => done())));

const quiet = { warn() {}, info() {}, debug() {}, error() {}, trace() {}, child: () => quiet } as unknown as Logger;

function dispatcher(targets: Target[], retries: number, backoffMs: number) {
  const db = new Database(':memory:') as unknown as SqlDatabase;
  const endpoints = { slack: 'http://127.0.0.1:1', discord: 'http://127.0.0.1:1', telegram: 'http://127.0.0.1:1' };
  return new Dispatcher(db, () => targets, { retries, backoffMs, logMax: 100, queueMax: 10, endpoints, agentName: 'test' }, quiet);
}

const target = (id: string, url: string): Target => ({ id, name: id, url, enabled: true, events: [], severities: [], deployments: [] });
const message = { event: 'alert.fired', severity: 'warning', title: 't', message: 'm', targets: [] as string[] } as const;

async function outcome(d: Dispatcher, id: string, within = 5000): Promise<DeliveryRecord> {
  const until = Date.now() + within;
  while (Date.now() < until) {
    const [record] = d.deliveries({ target: id, limit: 1, offset: 0 }).items;
    if (record) return record;
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new Error(`no delivery record of ${id}`);
}

describe('notification retries (p-retry)', () => {
  it('retries a failing target with doubling waits and records the attempts it took', async () => {
    answers.set('/flaky', [503, 429]);
    const d = dispatcher([target('flaky', `${base}/flaky`)], 3, 50);
    d.send({ ...message, targets: ['flaky'] });
    expect(await outcome(d, 'flaky')).toMatchObject({ status: 'delivered', attempts: 3, error: null });
    const at = hits.filter((h) => h.path === '/flaky').map((h) => h.at);
    expect(at).toHaveLength(3);
    // 50 ms, then 100 ms (no randomisation).
    expect(at[1]! - at[0]!).toBeGreaterThanOrEqual(45);
    expect(at[2]! - at[1]!).toBeGreaterThanOrEqual(95);
  });

  it('gives up at once on a failure retrying cannot mend (4xx but 408/429)', async () => {
    answers.set('/gone', [404, 404, 404]);
    const d = dispatcher([target('gone', `${base}/gone`)], 3, 10);
    d.send({ ...message, targets: ['gone'] });
    expect(await outcome(d, 'gone')).toMatchObject({ status: 'failed', attempts: 1, error: expect.stringContaining('HTTP 404') });
    expect(hits.filter((h) => h.path === '/gone')).toHaveLength(1);
  });

  it('retries failures that are not a DeliveryError, as before', async () => {
    // A stored URL the parser refuses throws before any request: retried like every other failure (they are handed
    // to p-retry as DeliveryErrors: it would not retry a TypeError).
    const d = dispatcher([target('odd', 'generic+http://')], 2, 5);
    d.send({ ...message, targets: ['odd'] });
    expect(await outcome(d, 'odd')).toMatchObject({ status: 'failed', attempts: 3, error: 'unexpected error (Error)' });
  });

  it('stops waiting when the agent stops, and records the failure with the attempts made', async () => {
    answers.set('/down', [503, 503, 503]);
    const d = dispatcher([target('down', `${base}/down`)], 2, 60_000);
    d.send({ ...message, targets: ['down'] });
    while (!hits.some((h) => h.path === '/down')) await new Promise((r) => setTimeout(r, 5));
    await new Promise((r) => setTimeout(r, 50));
    const stopped = performance.now();
    d.stop();
    const record = await outcome(d, 'down', 2000);
    expect(performance.now() - stopped).toBeLessThan(1000);
    expect(record).toMatchObject({ status: 'failed', attempts: 1, error: expect.stringContaining('HTTP 503') });
  });
});
