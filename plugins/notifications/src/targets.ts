/**
 * Notification target URLs: parsing, validation and masking. One URL says where and how to deliver:
 *   generic+https://[user:pass@]host[:port]/path[?query]   JSON POST to https://host/path (generic+http:// too)
 *   slack://[botname@]tokenA/tokenB/tokenC[?channel=…]     Slack incoming webhook
 *   discord://token@webhookid[?username=…]                 Discord webhook
 *   telegram://bottoken@telegram?chats=id1,@channel        Telegram bot API sendMessage
 *   smtp://[user[:pass]@]host[:port]/?from=…&to=a,b[&encryption=auto|none|starttls|tls]
 */

export const MASK = '****';

export type ParsedTarget =
  | { kind: 'generic'; url: URL; username: string; password: string }
  | { kind: 'slack'; botname: string | null; tokens: [string, string, string]; channel: string | null }
  | { kind: 'discord'; token: string; webhookId: string; username: string | null }
  | { kind: 'telegram'; token: string; chats: string[] }
  | {
      kind: 'smtp';
      host: string;
      port: number;
      username: string;
      password: string;
      from: string;
      to: string[];
      encryption: 'auto' | 'none' | 'starttls' | 'tls';
    };

export class TargetUrlError extends Error {}

const SCHEMES = ['generic+https', 'generic+http', 'slack', 'discord', 'telegram', 'smtp'] as const;
const EMAIL = /^[^\s@<>,;"]+@[A-Za-z0-9.-]+$/;
const HOST = /^(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$|^\[[0-9a-fA-F:.]+\]$/;

function schemeOf(raw: string): string {
  const m = /^([a-z][a-z0-9+.-]*):\/\//i.exec(raw);
  if (!m) throw new TargetUrlError('not a URL (expected scheme://…)');
  const scheme = m[1]!.toLowerCase();
  if (!(SCHEMES as readonly string[]).includes(scheme)) {
    throw new TargetUrlError(`unsupported scheme '${scheme}' (use ${SCHEMES.map((s) => `${s}://`).join(', ')})`);
  }
  return scheme;
}

/** WHATWG URL only parses userinfo/host for special schemes: reparse under http:// to read the parts. */
function parts(raw: string, scheme: string): URL {
  // The URL parser would skip extra slashes (`http:///x` has host x): require the authority to be there.
  if (/^[/?#]/.test(raw.slice(scheme.length + 3))) throw new TargetUrlError('a host is required after ://');
  try {
    return new URL(`http://${raw.slice(scheme.length + 3)}`);
  } catch {
    throw new TargetUrlError('malformed URL');
  }
}

const dec = (s: string) => {
  try {
    return decodeURIComponent(s);
  } catch {
    throw new TargetUrlError('malformed percent-encoding');
  }
};

export function parseTargetUrl(raw: string): ParsedTarget {
  if (raw.length > 2048) throw new TargetUrlError('URL longer than 2048 characters');
  // eslint-disable-next-line no-control-regex -- control characters are what it refuses
  if (/[\s\u0000-\u001f]/.test(raw)) throw new TargetUrlError('URL contains whitespace or control characters');
  const scheme = schemeOf(raw);
  const u = scheme === 'discord' ? new URL('http://discord') : parts(raw, scheme);
  switch (scheme) {
    case 'generic+https':
    case 'generic+http': {
      if (!u.hostname || !HOST.test(u.hostname)) throw new TargetUrlError('a host is required');
      const url = new URL(`${scheme.slice('generic+'.length)}://${u.host}${u.pathname}${u.search}`);
      return { kind: 'generic', url, username: dec(u.username), password: dec(u.password) };
    }
    case 'slack': {
      const tokens = [u.hostname, ...u.pathname.split('/').filter(Boolean)];
      if (tokens.length !== 3 || !tokens.every((t) => /^[A-Za-z0-9]{1,100}$/.test(t))) {
        throw new TargetUrlError('expected slack://[botname@]tokenA/tokenB/tokenC (the three parts of the webhook URL)');
      }
      // Hostnames are lower-cased by the URL parser: take the tokens from the raw text instead.
      const rest = raw
        .slice('slack://'.length)
        .replace(/^[^@/]*@/, '')
        .split(/[?#]/)[0]!;
      const rawTokens = rest.split('/').filter(Boolean) as [string, string, string];
      return { kind: 'slack', botname: u.username ? dec(u.username) : null, tokens: rawTokens, channel: u.searchParams.get('channel') };
    }
    case 'discord': {
      // Parsed by hand: a numeric host would be read as an IPv4 number by the URL parser.
      const m = /^discord:\/\/([^@/?#]*)@([^/?#]*)\/?(\?[^#]*)?$/i.exec(raw);
      if (!m) throw new TargetUrlError('expected discord://token@webhookid');
      const token = dec(m[1]!);
      if (!token || !/^[A-Za-z0-9_.-]{1,200}$/.test(token)) throw new TargetUrlError('expected discord://token@webhookid (missing or invalid token)');
      if (!/^\d{1,30}$/.test(m[2]!)) throw new TargetUrlError('expected discord://token@webhookid (the webhook id is numeric)');
      return { kind: 'discord', token, webhookId: m[2]!, username: new URLSearchParams(m[3] ?? '').get('username') };
    }
    case 'telegram': {
      const token = `${dec(u.username)}${u.password ? `:${dec(u.password)}` : ''}`;
      if (!/^\d{1,20}:[A-Za-z0-9_-]{10,100}$/.test(token)) throw new TargetUrlError('expected telegram://<bot token>@telegram?chats=… (invalid bot token)');
      const chats = (u.searchParams.get('chats') ?? '')
        .split(',')
        .map((c) => c.trim())
        .filter(Boolean);
      if (chats.length === 0) throw new TargetUrlError('telegram: the chats parameter is required (chats=id1,@channel)');
      if (!chats.every((c) => /^(-?\d{1,20}|@[A-Za-z0-9_]{4,64})$/.test(c))) throw new TargetUrlError('telegram: chats are numeric ids or @channel names');
      return { kind: 'telegram', token, chats };
    }
    default: {
      if (!u.hostname || !HOST.test(u.hostname)) throw new TargetUrlError('smtp: a host is required');
      const from = u.searchParams.get('from') ?? '';
      const to = (u.searchParams.get('to') ?? '')
        .split(',')
        .map((t) => t.trim())
        .filter(Boolean);
      if (!EMAIL.test(from)) throw new TargetUrlError('smtp: from=<address> is required');
      if (to.length === 0 || !to.every((t) => EMAIL.test(t))) throw new TargetUrlError('smtp: to=<address>[,<address>…] is required');
      const encryption = (u.searchParams.get('encryption') ?? 'auto').toLowerCase();
      if (!['auto', 'none', 'starttls', 'tls'].includes(encryption)) throw new TargetUrlError('smtp: encryption is auto, none, starttls or tls');
      const port = u.port ? Number(u.port) : encryption === 'tls' ? 465 : 587;
      return {
        kind: 'smtp',
        host: u.hostname.replace(/^\[|\]$/g, ''),
        port,
        username: dec(u.username),
        password: dec(u.password),
        from,
        to,
        encryption: encryption as 'auto' | 'none' | 'starttls' | 'tls',
      };
    }
  }
}

const SECRET_QUERY_KEY = /token|key|secret|pass|auth|sig|code/i;
/** A path segment that looks like a credential (webhook URLs often carry one): long, with digits. */
const secretLooking = (seg: string) => seg.length >= 16 && /\d/.test(seg) && /^[A-Za-z0-9_.~%-]+$/.test(seg);

/** The URL with its secrets replaced by `****` (what responses, logs and errors show). */
export function maskTargetUrl(raw: string): string {
  let scheme: string;
  try {
    scheme = schemeOf(raw);
  } catch {
    return MASK;
  }
  const body = raw.slice(scheme.length + 3);
  const authorityEnd = body.search(/[/?#]/);
  const authority = authorityEnd >= 0 ? body.slice(0, authorityEnd) : body;
  const at = authority.lastIndexOf('@');
  const userinfo = at >= 0 ? authority.slice(0, at) : null;
  const rest = at >= 0 ? body.slice(at + 1) : body;
  const [pathPart, ...queryParts] = rest.split('?');
  const query = queryParts.join('?');
  const maskQuery = (q: string) =>
    q
      ? `?${q
          .split('&')
          .map((kv) => {
            const eq = kv.indexOf('=');
            if (eq < 0) return kv;
            return SECRET_QUERY_KEY.test(kv.slice(0, eq)) ? `${kv.slice(0, eq)}=${MASK}` : kv;
          })
          .join('&')}`
      : '';
  switch (scheme) {
    case 'slack': {
      const user = userinfo !== null ? `${userinfo}@` : '';
      return `slack://${user}${pathPart!
        .split('/')
        .map((t) => (t ? MASK : t))
        .join('/')}${maskQuery(query)}`;
    }
    case 'discord':
    case 'telegram':
      return `${scheme}://${userinfo !== null ? `${MASK}@` : ''}${pathPart}${maskQuery(query)}`;
    default: {
      let user = '';
      if (userinfo !== null) {
        const colon = userinfo.indexOf(':');
        user = colon >= 0 ? `${userinfo.slice(0, colon)}:${MASK}@` : `${userinfo}@`;
      }
      const path =
        scheme === 'smtp'
          ? pathPart!
          : pathPart!
              .split('/')
              .map((s) => (secretLooking(s) ? MASK : s))
              .join('/');
      return `${scheme}://${user}${path}${maskQuery(query)}`;
    }
  }
}
