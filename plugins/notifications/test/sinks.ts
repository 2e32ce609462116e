/**
 * Real sinks for notification tests: an HTTP receiver (webhook, Slack, Discord and Telegram style targets) and an
 * SMTP server (smtp-server + mailparser), both on random loopback ports.
 */
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { SMTPServer } from 'smtp-server';
import { simpleParser } from 'mailparser';

export interface Received {
  method: string;
  path: string;
  headers: IncomingMessage['headers'];
  body: any;
  at: number;
}

async function waitUntil<T>(find: () => T | undefined, what: string, timeoutMs: number): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const found = find();
    if (found !== undefined) return found;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

export interface HttpSink {
  url: string;
  received: Received[];
  /** Answer requests whose path starts with `prefix` with this status (or never, with `hang`). */
  fail(prefix: string, status: number | 'hang'): void;
  waitFor(pred: (r: Received) => boolean, what?: string, timeoutMs?: number): Promise<Received>;
  close(): Promise<void>;
}

export async function startHttpSink(): Promise<HttpSink> {
  const received: Received[] = [];
  const failures = new Map<string, number | 'hang'>();
  const hanging: import('node:http').ServerResponse[] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const text = Buffer.concat(chunks).toString('utf8');
      let body: unknown = text;
      try {
        body = JSON.parse(text);
      } catch {
        /* keep text */
      }
      received.push({ method: req.method!, path: req.url!, headers: req.headers, body, at: Date.now() });
      const rule = [...failures.entries()].find(([prefix]) => req.url!.startsWith(prefix))?.[1];
      if (rule === 'hang') return void hanging.push(res);
      res.writeHead(rule ?? 200, { 'content-type': 'application/json' });
      res.end('{"ok":true}');
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}`,
    received,
    fail: (prefix, status) => void failures.set(prefix, status),
    waitFor: (pred, what = 'an HTTP request', timeoutMs = 20_000) => waitUntil(() => received.find(pred), what, timeoutMs),
    close: async () => {
      for (const res of hanging) res.destroy();
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}

export interface Mail {
  from: string;
  to: string[];
  subject: string;
  text: string;
  user: string | null;
}

export interface SmtpSink {
  port: number;
  mails: Mail[];
  waitFor(pred: (m: Mail) => boolean, what?: string, timeoutMs?: number): Promise<Mail>;
  close(): Promise<void>;
}

/** An SMTP server that requires AUTH (user/pass) and keeps every message it accepts, parsed. */
export async function startSmtpSink(user: string, pass: string): Promise<SmtpSink> {
  const mails: Mail[] = [];
  const server = new SMTPServer({
    secure: false,
    disabledCommands: ['STARTTLS'],
    allowInsecureAuth: true,
    authMethods: ['PLAIN', 'LOGIN'],
    logger: false,
    onAuth(auth, _session, cb) {
      if (auth.username === user && auth.password === pass) return cb(null, { user: auth.username });
      return cb(new Error('invalid credentials'));
    },
    onData(stream, session, cb) {
      simpleParser(stream).then(
        (parsed) => {
          mails.push({
            from: session.envelope.mailFrom ? session.envelope.mailFrom.address : '',
            to: session.envelope.rcptTo.map((r) => r.address),
            subject: parsed.subject ?? '',
            text: parsed.text ?? '',
            user: (session.user as string | undefined) ?? null,
          });
          cb();
        },
        (err: Error) => cb(err),
      );
    },
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.server.address() as AddressInfo).port;
  return {
    port,
    mails,
    waitFor: (pred, what = 'an e-mail', timeoutMs = 20_000) => waitUntil(() => mails.find(pred), what, timeoutMs),
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}
