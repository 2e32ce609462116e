/** Delivers one message to one parsed target. Throws a DeliveryError whose text never contains secrets. */
import type { NotificationMessage } from './api.js';
import type { ParsedTarget } from './targets.js';

export interface Endpoints {
  slack: string;
  discord: string;
  telegram: string;
}

export class DeliveryError extends Error {
  constructor(
    message: string,
    readonly retryable = true,
  ) {
    super(message);
  }
}

export interface Outgoing extends NotificationMessage {
  time: string;
  agent: string;
}

const TIMEOUT_MS = 10_000;

const plainText = (m: Outgoing) =>
  `${m.message}\n\nevent: ${m.event}\nseverity: ${m.severity}${m.deployment ? `\ndeployment: ${m.deployment}` : ''}\ntime: ${m.time}\nagent: ${m.agent}`;

async function post(url: string, body: unknown, what: string, headers: Record<string, string> = {}): Promise<void> {
  let res: Response;
  try {
    res = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'user-agent': 'host-agent-notifications', ...headers },
      body: JSON.stringify(body),
      redirect: 'error',
      signal: AbortSignal.timeout(TIMEOUT_MS),
    });
  } catch (err) {
    const cause = (err as { cause?: { code?: string } }).cause?.code ?? (err as Error).name;
    throw new DeliveryError(`${what}: request failed (${cause})`);
  }
  await res.arrayBuffer().catch(() => undefined);
  if (!res.ok) {
    // 4xx other than 408/429 will not get better by retrying.
    const retryable = res.status >= 500 || res.status === 408 || res.status === 429;
    throw new DeliveryError(`${what}: HTTP ${res.status}`, retryable);
  }
}

const join = (base: string, path: string) => `${base.replace(/\/+$/, '')}${path}`;

export async function deliver(target: ParsedTarget, m: Outgoing, endpoints: Endpoints): Promise<void> {
  switch (target.kind) {
    case 'generic': {
      const headers: Record<string, string> = {};
      if (target.username || target.password) {
        headers.authorization = `Basic ${Buffer.from(`${target.username}:${target.password}`).toString('base64')}`;
      }
      const { targets: _targets, ...payload } = m;
      return post(target.url.toString(), payload, `webhook ${target.url.host}`, headers);
    }
    case 'slack':
      return post(
        join(endpoints.slack, `/services/${target.tokens.map(encodeURIComponent).join('/')}`),
        {
          text: `*${m.title}*\n${plainText(m)}`,
          ...(target.botname ? { username: target.botname } : {}),
          ...(target.channel ? { channel: target.channel } : {}),
        },
        'slack',
      );
    case 'discord':
      return post(
        join(endpoints.discord, `/api/webhooks/${target.webhookId}/${encodeURIComponent(target.token)}`),
        {
          content: `**${m.title}**\n${plainText(m)}`.slice(0, 2000),
          ...(target.username ? { username: target.username } : {}),
        },
        'discord',
      );
    case 'telegram':
      for (const chat of target.chats) {
        await post(
          join(endpoints.telegram, `/bot${target.token}/sendMessage`),
          {
            chat_id: chat,
            text: `${m.title}\n${plainText(m)}`.slice(0, 4096),
          },
          `telegram chat ${chat}`,
        );
      }
      return;
    case 'smtp': {
      // nodemailer is loaded with the first e-mail, not at agent start.
      const { default: nodemailer } = await import('nodemailer');
      const transport = nodemailer.createTransport({
        host: target.host,
        port: target.port,
        secure: target.encryption === 'tls',
        ignoreTLS: target.encryption === 'none',
        requireTLS: target.encryption === 'starttls',
        ...(target.username ? { auth: { user: target.username, pass: target.password } } : {}),
        connectionTimeout: TIMEOUT_MS,
        greetingTimeout: TIMEOUT_MS,
        socketTimeout: TIMEOUT_MS,
      });
      try {
        await transport.sendMail({
          from: target.from,
          to: target.to,
          subject: `[${m.severity}] ${m.title}`,
          text: plainText(m),
        });
      } catch (err) {
        const e = err as { code?: string; responseCode?: number };
        const retryable = !(e.responseCode && e.responseCode >= 500 && e.responseCode < 600) && e.code !== 'EAUTH';
        throw new DeliveryError(`smtp ${target.host}:${target.port}: ${e.code ?? 'error'}${e.responseCode ? ` ${e.responseCode}` : ''}`, retryable);
      } finally {
        transport.close();
      }
      return;
    }
  }
}
