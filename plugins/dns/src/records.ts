/**
 * DNS names and record content, checked before anything reaches the server. Every problem names the field it is
 * in (`rrsets[2].records[0].content`), so a client can point at it.
 */
import { isIPv4, isIPv6 } from 'node:net';
import { errors } from '@agent/sdk';

export const RECORD_TYPES = ['A', 'AAAA', 'CNAME', 'MX', 'TXT', 'NS', 'SRV', 'CAA'] as const;
export type RecordType = (typeof RECORD_TYPES)[number];

const LABEL = /^(?:[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?)$/;
const HOST_LABEL = /^(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)$/;

const bad = (field: string, message: string) => errors.badRequest(`${field}: ${message}`, 'VALIDATION_FAILED', { field });

/** A fully qualified name with its trailing dot, lower case. `wildcard` allows a leading `*.` label. */
export function checkFqdn(value: string, field: string, options: { wildcard?: boolean; underscore?: boolean } = {}): string {
  const name = value.toLowerCase();
  if (!name.endsWith('.')) throw bad(field, `'${value}' must be fully qualified (end with a dot)`);
  if (name === '.') throw bad(field, 'the root zone is not allowed');
  if (name.length > 254) throw bad(field, 'longer than 253 characters');
  const labels = name.slice(0, -1).split('.');
  labels.forEach((label, i) => {
    if (i === 0 && label === '*' && options.wildcard) return;
    const ok = options.underscore ? LABEL.test(label) : HOST_LABEL.test(label);
    if (!ok) throw bad(field, `'${value}' has an invalid label '${label}'`);
  });
  return name;
}

/** A zone name: fully qualified, host-name labels, at least two labels (no bare TLD). */
export function checkZoneName(value: string, field = 'name'): string {
  const name = checkFqdn(value, field);
  if (name.split('.').length < 3) throw bad(field, `'${value}' must have at least two labels (e.g. example.org.)`);
  return name;
}

/** The zone contains the name (the apex or below it). */
export const inZone = (name: string, zone: string) => name === zone || name.endsWith(`.${zone}`);

const uint = (s: string | undefined, max: number): boolean => s !== undefined && /^\d{1,10}$/.test(s) && Number(s) <= max;

/** Quoted character-strings: `"a" "b"`, each at most 255 bytes once unescaped. */
function checkQuoted(content: string, field: string): void {
  const re = /"((?:[^"\\]|\\.)*)"\s*/gy;
  let pos = 0;
  let chunks = 0;
  while (pos < content.length) {
    re.lastIndex = pos;
    const m = re.exec(content);
    if (!m) throw bad(field, 'must be one or more double-quoted strings ("…"), with " and \\ escaped');
    const unescaped = m[1]!.replace(/\\(\d{3}|.)/g, 'x');
    if (Buffer.byteLength(unescaped) > 255) throw bad(field, 'a quoted string is longer than 255 bytes; split it into several "…" "…"');
    pos = re.lastIndex;
    chunks++;
  }
  if (chunks === 0) throw bad(field, 'must not be empty');
}

/** TXT given without quotes is quoted (and split in 255-byte pieces) so clients may send plain text. */
export function quoteTxt(text: string): string {
  const escaped: string[] = [];
  let current = '';
  let bytes = 0;
  for (const ch of text) {
    const piece = ch === '"' || ch === '\\' ? `\\${ch}` : ch;
    const size = Buffer.byteLength(ch);
    if (bytes + size > 255) {
      escaped.push(current);
      current = '';
      bytes = 0;
    }
    current += piece;
    bytes += size;
  }
  escaped.push(current);
  return escaped.map((s) => `"${s}"`).join(' ');
}

/** Checks (and normalises) the content of one record; returns the content to send. */
export function checkContent(type: RecordType, raw: string, field: string): string {
  const content = raw.trim();
  if (content === '') throw bad(field, 'must not be empty');
  // eslint-disable-next-line no-control-regex -- control characters are what it refuses
  if (/[\u0000-\u001f\u007f]/.test(content)) throw bad(field, 'must not contain control characters');
  const parts = content.split(/\s+/);
  switch (type) {
    case 'A':
      if (!isIPv4(content) || !/^\d{1,3}(\.\d{1,3}){3}$/.test(content)) throw bad(field, `'${raw}' is not an IPv4 address`);
      return content;
    case 'AAAA':
      if (!isIPv6(content)) throw bad(field, `'${raw}' is not an IPv6 address`);
      return content.toLowerCase();
    case 'CNAME':
    case 'NS':
      if (parts.length !== 1) throw bad(field, 'must be one fully qualified host name');
      return checkFqdn(content, field, { underscore: type === 'CNAME' });
    case 'MX': {
      if (parts.length !== 2 || !uint(parts[0], 65535)) throw bad(field, "must be '<preference 0-65535> <host.>'");
      const target = parts[1] === '.' ? '.' : checkFqdn(parts[1]!, field);
      return `${Number(parts[0])} ${target}`;
    }
    case 'SRV': {
      if (parts.length !== 4 || !uint(parts[0], 65535) || !uint(parts[1], 65535) || !uint(parts[2], 65535)) {
        throw bad(field, "must be '<priority> <weight> <port> <target.>' (numbers 0-65535)");
      }
      const target = parts[3] === '.' ? '.' : checkFqdn(parts[3]!, field);
      return `${Number(parts[0])} ${Number(parts[1])} ${Number(parts[2])} ${target}`;
    }
    case 'CAA': {
      const m = /^(\d{1,3})\s+([a-z0-9]{1,15})\s+("(?:[^"\\]|\\.)*")$/i.exec(content);
      if (!m || Number(m[1]) > 255) throw bad(field, 'must be \'<flags 0-255> <tag> "<value>"\', e.g. 0 issue "letsencrypt.org"');
      const tag = m[2]!.toLowerCase();
      if (!['issue', 'issuewild', 'iodef', 'contactemail', 'contactphone'].includes(tag)) {
        throw bad(field, `CAA tag '${m[2]}' is not one of issue, issuewild, iodef, contactemail, contactphone`);
      }
      return `${Number(m[1])} ${tag} ${m[3]}`;
    }
    case 'TXT': {
      const quoted = content.startsWith('"') ? content : quoteTxt(raw);
      checkQuoted(quoted, field);
      return quoted;
    }
  }
}

/** Rules that depend on the record set as a whole. */
export function checkRRsetShape(type: RecordType, name: string, zone: string, contents: string[], field: string): void {
  if (type === 'CNAME') {
    if (contents.length > 1) throw bad(`${field}.records`, 'a CNAME record set holds exactly one record');
    if (name === zone) throw bad(`${field}.name`, 'a CNAME cannot be at the zone apex');
  }
  if (type === 'SRV') {
    const labels = name.split('.');
    if (!labels[0]?.startsWith('_') || !labels[1]?.startsWith('_'))
      throw bad(`${field}.name`, "SRV names start with '_service._proto.' (e.g. _sip._tcp.example.org.)");
  }
  if (new Set(contents).size !== contents.length) throw bad(`${field}.records`, 'contains the same record twice');
}
