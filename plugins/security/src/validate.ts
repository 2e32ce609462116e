/**
 * Validation of everything the security plugin writes into nginx's configuration (the proxy extensions write
 * snippets as given: validating is the contributor's part). Values are checked against strict patterns, so nothing
 * from a request can break out of a directive (`;`, `}`, quotes, newlines, `$`, spaces) or a folder (`..`).
 */
import { isIP } from 'node:net';
import { errors } from '@agent/sdk';

/** An IPv4 or IPv6 address, normalised. */
export function checkIp(value: string, field: string): string {
  if (isIP(value) === 0) throw errors.badRequest(`${field}: '${printable(value)}' is not an IP address`, 'VALIDATION_FAILED', { field });
  return value.toLowerCase();
}

/** `a.b.c.d/n` or `ipv6/n` with a sane prefix length. */
export function checkCidr(value: string, field: string): string {
  const m = /^([^/]+)\/(\d{1,3})$/.exec(value);
  const family = m ? isIP(m[1]!) : 0;
  const bits = m ? Number(m[2]) : -1;
  if (!m || family === 0 || bits < 0 || bits > (family === 4 ? 32 : 128)) {
    throw errors.badRequest(`${field}: '${printable(value)}' is not a CIDR range`, 'VALIDATION_FAILED', { field });
  }
  return value.toLowerCase();
}

/** Characters allowed in URL paths written into nginx locations: no spaces, quotes, `;{}$`, `..` or `//`. */
const PATH_RE = /^\/[A-Za-z0-9._~\-/@:+]*$/;

/** A URL path prefix such as `/` or `/api/v1`; trailing slashes are removed (except for the root). */
export function checkUrlPath(value: string, field: string): string {
  if (!PATH_RE.test(value) || value.includes('..') || value.includes('//') || value.length > 512) {
    throw errors.badRequest(`${field}: '${printable(value)}' is not a valid URL path (start with '/', no '..', spaces, quotes or ;{}$)`, 'VALIDATION_FAILED', {
      field,
    });
  }
  return value.length > 1 ? value.replace(/\/+$/, '') || '/' : value;
}

/** Free text kept in the agent's state only (reasons, descriptions): no control characters. */
export function checkText(value: string, field: string, max = 500): string {
  // eslint-disable-next-line no-control-regex
  if (value.length > max || /[\u0000-\u001f\u007f]/.test(value)) {
    throw errors.badRequest(`${field}: must be at most ${max} characters without control characters`, 'VALIDATION_FAILED', { field });
  }
  return value;
}

/** For error messages: never echo control characters back. */
export const printable = (value: string) => value.replace(/[^\x20-\x7e]/g, '?').slice(0, 120);

/** Whether `ip` lies inside `cidr` (both already validated). */
export function cidrContains(cidr: string, ip: string): boolean {
  const [base, bitsText] = cidr.split('/') as [string, string];
  const a = ipBytes(base);
  const b = ipBytes(ip);
  if (!a || !b || a.length !== b.length) return false;
  let bits = Number(bitsText);
  for (let i = 0; i < a.length && bits > 0; i++, bits -= 8) {
    const mask = bits >= 8 ? 0xff : (0xff << (8 - bits)) & 0xff;
    if ((a[i]! & mask) !== (b[i]! & mask)) return false;
  }
  return true;
}

function ipBytes(ip: string): number[] | null {
  if (isIP(ip) === 4) return ip.split('.').map(Number);
  if (isIP(ip) !== 6) return null;
  const [head, tail] = ip.includes('::') ? (ip.split('::') as [string, string]) : [ip, ''];
  const parse = (s: string) => (s ? s.split(':') : []);
  let h = parse(head);
  let t = parse(tail);
  // An embedded IPv4 tail (::ffff:1.2.3.4) counts as two groups.
  const v4 = (groups: string[]) =>
    groups.flatMap((g) =>
      g.includes('.')
        ? (() => {
            const n = g.split('.').map(Number);
            return [((n[0]! << 8) | n[1]!).toString(16), ((n[2]! << 8) | n[3]!).toString(16)];
          })()
        : [g],
    );
  h = v4(h);
  t = v4(t);
  const groups = [...h, ...Array(8 - h.length - t.length).fill('0'), ...t];
  return groups.flatMap((g) => {
    const n = parseInt(g, 16);
    return [n >> 8, n & 0xff];
  });
}

/** An address or a range. */
export const ipOrCidr = (value: string, field: string) => (value.includes('/') ? checkCidr(value, field) : checkIp(value, field));
