/**
 * Validation of everything that ends up in nginx configuration. Values are checked against strict patterns, so
 * nothing from a request can break out of a directive (`;`, `}`, quotes, newlines, `$`, spaces) or a folder (`..`).
 */
import { isIP } from 'node:net';
import { errors, HOSTNAME } from '@agent/sdk';

const HOST_RE = new RegExp(HOSTNAME);

/** A host name with at least one dot (or `localhost`-style single labels when allowed). Lower case only. */
export function checkHostname(value: string, field: string): string {
  const host = value.trim().toLowerCase();
  if (host !== value || !HOST_RE.test(host) || !host.includes('.')) {
    throw errors.badRequest(`${field}: '${printable(value)}' is not a valid domain name`, 'VALIDATION_FAILED', { field });
  }
  return host;
}

/** An IPv4 or IPv6 address, normalised. */
export function checkIp(value: string, field: string): string {
  if (isIP(value) === 0) throw errors.badRequest(`${field}: '${printable(value)}' is not an IP address`, 'VALIDATION_FAILED', { field });
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

/** For error messages: never echo control characters back. */
export const printable = (value: string) => value.replace(/[^\x20-\x7e]/g, '?').slice(0, 120);
