/** What the kernel reads of a request line and its connection: path, query string, client address. */
import type { IncomingMessage } from 'node:http';

/** `http://host:port` of a request target in absolute form (sent to proxies), which the path does not include. */
const AUTHORITY = /^[A-Za-z][A-Za-z0-9+.-]*:\/\/[^/?#]*/;

/** The target in origin form (`/path?query`): the usual request line, or an absolute one without its authority. */
function originForm(url: string): string {
  if (url.charCodeAt(0) === 0x2f) return url;
  const authority = AUTHORITY.exec(url);
  if (!authority) return url;
  const rest = url.slice(authority[0].length);
  return rest.charCodeAt(0) === 0x2f ? rest : `/${rest}`;
}

/** The path of a request target, still percent-encoded: up to its `?` or `#`. */
export function pathOf(url: string): string {
  const target = originForm(url);
  const q = target.indexOf('?');
  const h = target.indexOf('#');
  const end = q < 0 ? h : h < 0 ? q : Math.min(q, h);
  return end < 0 ? target : target.slice(0, end);
}

/** The query string of a request target, without its `?`: up to its `#`; empty when there is none. */
export function queryOf(url: string): string {
  const q = url.indexOf('?');
  if (q < 0) return '';
  const h = url.indexOf('#');
  if (h >= 0 && h < q) return '';
  return url.slice(q + 1, h < 0 ? undefined : h);
}

/**
 * The client's address: behind a trusted proxy the first `X-Forwarded-For` entry (the client as the outermost
 * proxy saw it), else the peer of the connection; empty when neither is known.
 */
export function clientIp(req: IncomingMessage, trustProxy: boolean): string {
  if (trustProxy) {
    // Node joins repeated X-Forwarded-For headers into one value.
    const forwarded = req.headers['x-forwarded-for'] as string | undefined;
    if (forwarded) {
      const comma = forwarded.indexOf(',');
      const first = (comma < 0 ? forwarded : forwarded.slice(0, comma)).trim();
      if (first) return first;
    }
  }
  return req.socket.remoteAddress ?? '';
}
