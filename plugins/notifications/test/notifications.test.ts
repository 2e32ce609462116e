import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startAgent, type TestAgent } from '../../../test/helpers/agent.js';
import { startHttpSink, startSmtpSink, type HttpSink, type SmtpSink } from './sinks.js';

const FIXTURE = join(import.meta.dirname, 'fixture');
const SLACK = 'slack://agentbot@T0001/B0002/XXXXsecretXXXX';
const TELEGRAM_TOKEN = '123456:ABCdefGHIjklMNOpqr';

describe('notifications', () => {
  let agent: TestAgent;
  let http: HttpSink;
  let smtp: SmtpSink;
  let smtpUrl: string;

  beforeAll(async () => {
    [http, smtp] = await Promise.all([startHttpSink(), startSmtpSink('mailer', 'Smtp-Secret-9')]);
    smtpUrl = `smtp://mailer:Smtp-Secret-9@127.0.0.1:${smtp.port}/?from=agent@example.test&to=ops@example.test,oncall@example.test&encryption=none`;
    agent = await startAgent({
      plugins: ['notifications', FIXTURE],
      config: {
        notifications: {
          retries: 2,
          retry_backoff_ms: 100,
          endpoints: { slack: `${http.url}/slack`, discord: `${http.url}/discord`, telegram: `${http.url}/telegram` },
        },
      },
    });
  });
  afterAll(async () => {
    await agent?.stop();
    await Promise.all([http?.close(), smtp?.close()]);
  });

  const targets = () => [
    {
      id: 'hook',
      name: 'webhook',
      url: `generic+http://hookuser:Hook-Pass-1@127.0.0.1:${new URL(http.url).port}/hook?token=abc123`,
      events: ['backup.failed', 'test'],
    },
    { id: 'slack', name: 'slack', url: SLACK, severities: ['critical'] },
    { id: 'discord', name: 'discord', url: 'discord://Disc0rdT0ken_x@112233445566?username=agent', deployments: ['shop'] },
    { id: 'telegram', name: 'telegram', url: `telegram://${TELEGRAM_TOKEN}@telegram?chats=-100200,@ops_channel`, events: ['certificate.expiring'] },
    { id: 'mail', name: 'mail', url: smtpUrl, events: ['deployment.failed', 'security.ip_blocked'] },
    { id: 'off', name: 'disabled', url: `generic+http://127.0.0.1:${new URL(http.url).port}/off`, enabled: false },
  ];

  it('refuses an invalid URL with 400 naming the target', async () => {
    const res = await agent.api('PUT', '/notifications/targets', { body: [...targets(), { name: 'broken', url: 'ftp://example.test/x' }] });
    expect(res.status).toBe(400);
    expect(res.body.code).toBe('INVALID_TARGET_URL');
    expect(res.body.error).toContain("'broken'");
    const bad = await agent.api('PUT', '/notifications/targets', { body: [{ name: 'tg', url: 'telegram://nope@telegram' }] });
    expect(bad.status).toBe(400);
    expect(bad.body.error).toMatch(/'tg'.*token/);
    const smtpBad = await agent.api('PUT', '/notifications/targets', { body: [{ name: 'm', url: 'smtp://host.example/?from=a@b.c' }] });
    expect(smtpBad.body.error).toMatch(/'m'.*to=/);
  });

  it('stores targets and masks their secrets on read', async () => {
    const put = await agent.api('PUT', '/notifications/targets', { body: targets() });
    expect(put.status).toBe(200);
    const res = await agent.api('GET', '/notifications/targets');
    expect(res.status).toBe(200);
    const text = JSON.stringify(res.body);
    for (const secret of ['Hook-Pass-1', 'abc123', 'XXXXsecretXXXX', 'T0001', 'Disc0rdT0ken_x', 'ABCdefGHIjklMNOpqr', 'Smtp-Secret-9'])
      expect(text).not.toContain(secret);
    const byId = Object.fromEntries(res.body.data.map((t: any) => [t.id, t]));
    expect(byId.hook.url).toBe(`generic+http://hookuser:****@127.0.0.1:${new URL(http.url).port}/hook?token=****`);
    expect(byId.slack.url).toBe('slack://agentbot@****/****/****');
    expect(byId.discord.url).toBe('discord://****@112233445566?username=agent');
    expect(byId.mail.url).toContain('smtp://mailer:****@127.0.0.1');
    expect(byId.off.enabled).toBe(false);
    // Nor on disk: the document is encrypted.
    const { readdirSync, readFileSync } = await import('node:fs');
    const dir = join(agent.dataDir, 'plugins', 'notifications');
    for (const f of readdirSync(dir)) if (f.startsWith('targets')) expect(readFileSync(join(dir, f), 'utf8')).not.toContain('Smtp-Secret-9');
  });

  it('keeps stored secrets when the masked list is sent back, and refuses a masked URL for a new target', async () => {
    const current = (await agent.api('GET', '/notifications/targets')).body.data;
    const back = current.map(({ scheme: _s, ...t }: any) => t);
    expect((await agent.api('PUT', '/notifications/targets', { body: back })).status).toBe(200);
    const masked = await agent.api('PUT', '/notifications/targets', { body: [{ name: 'new', url: current[0].url }] });
    expect(masked.status).toBe(400);
    expect(masked.body.error).toContain("'new'");
    // The SMTP password survived the round trip: the server accepts the login.
    const test = await agent.api('POST', '/notifications/test', { body: { target_id: 'mail', message: 'round trip' } });
    expect(test.status).toBe(200);
    const mail = await smtp.waitFor((m) => m.text.includes('round trip'));
    expect(mail.user).toBe('mailer');
    expect(mail.subject).toBe('[info] Test notification');
    expect(mail.to).toEqual(['ops@example.test', 'oncall@example.test']);
    expect(mail.from).toBe('agent@example.test');
  });

  it('sends test messages to each kind of target', async () => {
    for (const id of ['hook', 'slack', 'discord', 'telegram']) {
      const res = await agent.api('POST', '/notifications/test', { body: { target_id: id, message: `hello ${id}` } });
      expect(res.status, res.text).toBe(200);
      expect(res.body.data.delivered).toBe(true);
      expect(res.text).not.toMatch(/XXXXsecretXXXX|Disc0rdT0ken_x|ABCdefGHIjklMNOpqr|Hook-Pass-1/);
    }
    const hook = await http.waitFor((r) => r.path.startsWith('/hook') && r.body?.message === 'hello hook');
    expect(hook.path).toBe('/hook?token=abc123');
    expect(hook.headers.authorization).toBe(`Basic ${Buffer.from('hookuser:Hook-Pass-1').toString('base64')}`);
    expect(hook.body).toMatchObject({ event: 'test', severity: 'info', title: 'Test notification', deployment: null });
    const slack = await http.waitFor((r) => r.path === '/slack/services/T0001/B0002/XXXXsecretXXXX');
    expect(slack.body).toMatchObject({ username: 'agentbot', text: expect.stringContaining('hello slack') });
    const discord = await http.waitFor((r) => r.path === '/discord/api/webhooks/112233445566/Disc0rdT0ken_x');
    expect(discord.body).toMatchObject({ username: 'agent', content: expect.stringContaining('hello discord') });
    const chats = http.received.filter((r) => r.path === `/telegram/bot${TELEGRAM_TOKEN}/sendMessage`).map((r) => r.body.chat_id);
    expect(chats).toEqual(['-100200', '@ops_channel']);
    // By URL too; a failing one answers 502 without the secret.
    const direct = await agent.api('POST', '/notifications/test', { body: { url: `generic+http://127.0.0.1:${new URL(http.url).port}/direct` } });
    expect(direct.status).toBe(200);
    http.fail('/nope', 404);
    const failed = await agent.api('POST', '/notifications/test', {
      body: { url: `generic+http://u:Very-Secret-Pw@127.0.0.1:${new URL(http.url).port}/nope` },
    });
    expect(failed.status).toBe(502);
    expect(failed.body.code).toBe('NOTIFICATION_FAILED');
    expect(failed.text).not.toContain('Very-Secret-Pw');
  });

  it('delivers bus events to the targets that subscribe to them', async () => {
    const emit = (event: string, payload: unknown) => agent.api('POST', '/test-fixture/emit', { body: { event, payload } });
    expect((await emit('backup.finished', { id: 'b1', deployment: 'shop', success: false, error: 'disk full' })).status).toBe(200);
    await emit('backup.finished', { id: 'b2', deployment: 'shop', success: true });
    await emit('deployment.failed', { name: 'blog', error: 'port 80 already allocated' });
    await emit('certificate.expiring', { domain: 'shop.example.test', days_left: 5 });
    await emit('security.ip_blocked', { ip: '203.0.113.9', reason: 'too many 404', deployment: null, auto: true });
    await emit('security.ip_blocked', { ip: '203.0.113.10', reason: 'manual', deployment: null, auto: false });

    // backup failed: the webhook (its events), slack (critical), discord (deployment shop).
    const hook = await http.waitFor((r) => r.path.startsWith('/hook') && r.body?.event === 'backup.failed');
    expect(hook.body).toMatchObject({ severity: 'critical', deployment: 'shop', message: expect.stringContaining('disk full') });
    await http.waitFor((r) => r.path.startsWith('/slack') && r.body.text.includes('Backup failed: shop'));
    await http.waitFor((r) => r.path.startsWith('/discord') && r.body.content.includes('Backup failed: shop'));
    // deployment failed: e-mail (its events) and slack (critical), not discord (other deployment).
    const mail = await smtp.waitFor((m) => m.subject.includes('Deployment failed to start: blog'));
    expect(mail.subject).toBe('[critical] Deployment failed to start: blog');
    expect(mail.text).toContain('port 80 already allocated');
    expect(mail.text).toContain('deployment: blog');
    // certificate expiring in 5 days: telegram (its events), critical.
    await http.waitFor((r) => r.path.startsWith('/telegram') && r.body.text.includes('shop.example.test'));
    await smtp.waitFor((m) => m.subject.includes('IP auto-blocked: 203.0.113.9'));

    const log = await agent.api('GET', '/notifications/deliveries', { query: { limit: 100 } });
    expect(log.status).toBe(200);
    const rows = log.body.data.map((d: any) => `${d.target_name}:${d.event}:${d.status}`);
    expect(rows).toEqual(
      expect.arrayContaining(['webhook:backup.failed:delivered', 'mail:deployment.failed:delivered', 'telegram:certificate.expiring:delivered']),
    );
    expect(rows.some((r: string) => r.startsWith('discord:deployment.failed'))).toBe(false);
    expect(rows.some((r: string) => r.includes('203.0.113.10'))).toBe(false);
    expect(smtp.mails.some((m) => m.subject.includes('203.0.113.10'))).toBe(false);
    expect(http.received.some((r) => r.path.startsWith('/off'))).toBe(false);
    expect(log.body.meta).toMatchObject({ limit: 100, offset: 0, total: expect.any(Number) });
  });

  it('retries a failing target with backoff without holding up the others', async () => {
    const port = new URL(http.url).port;
    http.fail('/broken', 503);
    http.fail('/stuck', 'hang');
    await agent.api('PUT', '/notifications/targets', {
      body: [
        { id: 'broken', name: 'broken', url: `generic+http://127.0.0.1:${port}/broken` },
        { id: 'stuck', name: 'stuck', url: `generic+http://127.0.0.1:${port}/stuck` },
        { id: 'fine', name: 'fine', url: `generic+http://127.0.0.1:${port}/fine` },
      ],
    });
    const sent = await agent.api('POST', '/notifications/send', {
      body: { event: 'alert.fired', severity: 'warning', title: 'cpu high', message: 'cpu above 0.5 for 10s', deployment: 'shop' },
    });
    expect(sent.status).toBe(202);
    expect(sent.body.data.queued.sort()).toEqual(['broken', 'fine', 'stuck']);
    await http.waitFor((r) => r.path === '/fine' && r.body.title === 'cpu high', 'the healthy target', 5000);
    // 1 attempt + 2 retries, 100 ms then 200 ms apart.
    const deadline = Date.now() + 10_000;
    let broken: any;
    while (Date.now() < deadline) {
      broken = (await agent.api('GET', '/notifications/deliveries', { query: { target: 'broken' } })).body.data[0];
      if (broken) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    expect(broken).toMatchObject({ status: 'failed', attempts: 3, error: expect.stringContaining('HTTP 503'), event: 'alert.fired' });
    const hits = http.received.filter((r) => r.path === '/broken');
    expect(hits).toHaveLength(3);
    expect(hits[2]!.at - hits[0]!.at).toBeGreaterThanOrEqual(280);
    // Explicit targets go there whatever the filters; unknown names are ignored.
    const explicit = await agent.api('POST', '/notifications/send', {
      body: { event: 'health.recovered', severity: 'info', title: 't', message: 'm', targets: ['fine', 'ghost'] },
    });
    expect(explicit.body.data.queued).toEqual(['fine']);
  });

  it('validates what is sent', async () => {
    const res = await agent.api('POST', '/notifications/send', { body: { event: 'nope', severity: 'info', title: 't', message: 'm' } });
    expect(res.status).toBe(400);
    const both = await agent.api('POST', '/notifications/test', { body: {} });
    expect(both.status).toBe(400);
    const missing = await agent.api('POST', '/notifications/test', { body: { target_id: 'ghost' } });
    expect(missing.status).toBe(404);
  });
});
