/**
 * The tar header format (POSIX ustar with pax extended headers for long paths and large sizes), encoded and
 * decoded by hand so the writer and reader stream without any buffering beyond one block.
 */

export const BLOCK = 512;

export type EntryType = 'file' | 'directory' | 'symlink' | 'pax' | 'other';

export interface TarHeader {
  path: string;
  type: EntryType;
  size: number;
  mode: number;
  mtime: number;
  linkname: string;
}

const TYPEFLAG: Record<Exclude<EntryType, 'other'>, string> = { file: '0', directory: '5', symlink: '2', pax: 'x' };

function octal(value: number, width: number): string {
  // width includes the terminating NUL
  return value.toString(8).padStart(width - 1, '0') + '\0';
}

function writeString(block: Buffer, offset: number, width: number, value: string): void {
  block.write(value, offset, width, 'utf8');
}

function checksum(block: Buffer): number {
  let sum = 0;
  for (let i = 0; i < BLOCK; i++) sum += i >= 148 && i < 156 ? 32 : block[i]!;
  return sum;
}

/** A pax record: "<len> <key>=<value>\n" where len counts the whole record, itself included. */
function paxRecord(key: string, value: string): string {
  const body = ` ${key}=${value}\n`;
  let len = Buffer.byteLength(body) + 1;
  while (String(len).length + Buffer.byteLength(body) !== len) len = String(len).length + Buffer.byteLength(body);
  return `${len}${body}`;
}

const MAX_OCTAL_SIZE = 0o77777777777; // 11 octal digits

/** Encodes a header block, preceded by a pax header when the path or size does not fit ustar. */
export function encodeHeader(h: Omit<TarHeader, 'type'> & { type: Exclude<EntryType, 'pax' | 'other'> }): Buffer {
  const pax: string[] = [];
  const pathBytes = Buffer.byteLength(h.path);
  let name = h.path;
  let prefix = '';
  if (pathBytes > 100) {
    // ustar can split a path of up to 255 bytes at a slash; anything else goes to pax.
    const cut = h.path.lastIndexOf('/', 155);
    if (cut > 0 && Buffer.byteLength(h.path.slice(0, cut)) <= 155 && Buffer.byteLength(h.path.slice(cut + 1)) <= 100 && !/[^\x20-\x7e]/.test(h.path)) {
      prefix = h.path.slice(0, cut);
      name = h.path.slice(cut + 1);
    } else {
      pax.push(paxRecord('path', h.path));
      name = h.path.slice(0, 99).replace(/[^\x20-\x7e]/g, '_');
    }
  }
  if (h.size > MAX_OCTAL_SIZE) pax.push(paxRecord('size', String(h.size)));
  if (Buffer.byteLength(h.linkname) > 100) pax.push(paxRecord('linkpath', h.linkname));

  const main = headerBlock({
    ...h,
    path: name,
    prefix,
    size: Math.min(h.size, MAX_OCTAL_SIZE),
    linkname: Buffer.byteLength(h.linkname) > 100 ? '' : h.linkname,
  });
  if (pax.length === 0) return main;
  const paxBody = Buffer.from(pax.join(''));
  const paxHeader = headerBlock({ path: 'PaxHeader', prefix: '', type: 'pax', size: paxBody.length, mode: 0o644, mtime: h.mtime, linkname: '' });
  return Buffer.concat([paxHeader, paxBody, Buffer.alloc(padding(paxBody.length)), main]);
}

function headerBlock(h: {
  path: string;
  prefix: string;
  type: Exclude<EntryType, 'other'>;
  size: number;
  mode: number;
  mtime: number;
  linkname: string;
}): Buffer {
  const block = Buffer.alloc(BLOCK);
  writeString(block, 0, 100, h.path);
  writeString(block, 100, 8, octal(h.mode & 0o7777, 8));
  writeString(block, 108, 8, octal(0, 8));
  writeString(block, 116, 8, octal(0, 8));
  writeString(block, 124, 12, octal(h.size, 12));
  writeString(block, 136, 12, octal(Math.max(0, Math.floor(h.mtime)), 12));
  writeString(block, 156, 1, TYPEFLAG[h.type]);
  writeString(block, 157, 100, h.linkname);
  writeString(block, 257, 6, 'ustar\0');
  writeString(block, 263, 2, '00');
  writeString(block, 345, 155, h.prefix);
  writeString(block, 148, 8, octal(checksum(block), 7) + ' ');
  return block;
}

export const padding = (size: number): number => (BLOCK - (size % BLOCK)) % BLOCK;

function readString(block: Buffer, offset: number, width: number): string {
  const slice = block.subarray(offset, offset + width);
  const nul = slice.indexOf(0);
  return slice.subarray(0, nul === -1 ? width : nul).toString('utf8');
}

function readOctal(block: Buffer, offset: number, width: number): number {
  const text = readString(block, offset, width).trim();
  if (text === '') return 0;
  if (!/^[0-7]+$/.test(text)) throw new TarError(`invalid number field '${text}' in tar header`);
  return parseInt(text, 8);
}

export class TarError extends Error {
  override readonly name = 'TarError';
}

export const isZeroBlock = (block: Buffer): boolean => block.every((b) => b === 0);

/** Decodes one header block (validating its checksum). */
export function decodeHeader(block: Buffer): TarHeader {
  const stored = readOctal(block, 148, 8);
  if (stored !== checksum(block)) throw new TarError('tar header checksum mismatch (corrupted archive)');
  const flag = String.fromCharCode(block[156]!);
  const type: EntryType =
    flag === '0' || flag === '\0' || flag === '7' ? 'file' : flag === '5' ? 'directory' : flag === '2' ? 'symlink' : flag === 'x' ? 'pax' : 'other';
  const name = readString(block, 0, 100);
  const prefix = readString(block, 257, 6) === 'ustar' ? readString(block, 345, 155) : '';
  return {
    path: prefix ? `${prefix}/${name}` : name,
    type,
    size: readOctal(block, 124, 12),
    mode: readOctal(block, 100, 8),
    mtime: readOctal(block, 136, 12),
    linkname: readString(block, 157, 100),
  };
}

/** Parses pax records into key/value pairs. */
export function parsePax(body: Buffer): Record<string, string> {
  const out: Record<string, string> = {};
  let pos = 0;
  while (pos < body.length) {
    const space = body.indexOf(0x20, pos);
    if (space === -1) break;
    const len = parseInt(body.subarray(pos, space).toString('ascii'), 10);
    if (!Number.isFinite(len) || len <= 0 || pos + len > body.length) throw new TarError('invalid pax header');
    const record = body.subarray(space + 1, pos + len - 1).toString('utf8');
    const eq = record.indexOf('=');
    if (eq > 0) out[record.slice(0, eq)] = record.slice(eq + 1);
    pos += len;
  }
  return out;
}
