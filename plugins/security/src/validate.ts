/**
 * Validation of everything the security plugin writes into nginx's configuration (the proxy extensions write
 * snippets as given: validating is the contributor's part). Values are checked against strict patterns, so nothing
 * from a request can break out of a directive (`;`, `}`, quotes, newlines, `$`, spaces) or a folder (`..`).
 */
import { BlockList, isIP } from 'node:net';
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

/**
 * Addresses and ranges (`10.0.0.0/8`, `2001:db8::/32`, `::1`; already validated) as Node's `net.BlockList`, the
 * range matching the databases plugin uses too. It compares addresses, not texts: `::1` and `0:0:0:0:0:0:0:1` are
 * one address, and an IPv4-mapped IPv6 address (`::ffff:10.0.0.1`, what a dual-stack socket reports) lies in the
 * IPv4 ranges that hold its IPv4 address, and the reverse. A value that is not an address is left out.
 */
export function addressList(values: Iterable<string>): BlockList {
  const list = new BlockList();
  for (const value of values) {
    const slash = value.indexOf('/');
    const address = slash === -1 ? value : value.slice(0, slash);
    const family = isIP(address);
    if (family === 0) continue;
    if (slash === -1) list.addAddress(address, family === 6 ? 'ipv6' : 'ipv4');
    else list.addSubnet(address, Number(value.slice(slash + 1)), family === 6 ? 'ipv6' : 'ipv4');
  }
  return list;
}

/** Whether the list holds `ip` (false for anything that is not an address). */
export function listed(list: BlockList, ip: string): boolean {
  const family = isIP(ip);
  return family !== 0 && list.check(ip, family === 6 ? 'ipv6' : 'ipv4');
}

/** Whether `ip` lies inside `cidr` (both already validated). */
export const cidrContains = (cidr: string, ip: string): boolean => listed(addressList([cidr]), ip);

/** An address or a range. */
export const ipOrCidr = (value: string, field: string) => (value.includes('/') ? checkCidr(value, field) : checkIp(value, field));
