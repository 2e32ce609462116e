/**
 * Uploads as a client sends them: a multipart/form-data body built by hand (fields, then the archive), sent with
 * node's http client, which (unlike fetch) reads an answer that comes while the body is still being sent (a 413 or
 * 403 before the whole upload arrived).
 */
import { randomBytes } from 'node:crypto';
import { request } from 'node:http';
import { Readable } from 'node:stream';

export interface UploadAnswer {
  status: number;
  body: any;
  text: string;
}

export function multipart(fields: Record<string, string>, archive: Buffer, filename = 'backup.tar.gz'): { body: Buffer; type: string } {
  const boundary = `----upload${randomBytes(8).toString('hex')}`;
  const parts: Buffer[] = [];
  for (const [name, value] of Object.entries(fields))
    parts.push(Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="${name}"\r\n\r\n${value}\r\n`));
  parts.push(Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="archive"; filename="${filename}"\r\nContent-Type: application/gzip\r\n\r\n`));
  parts.push(archive, Buffer.from(`\r\n--${boundary}--\r\n`));
  return { body: Buffer.concat(parts), type: `multipart/form-data; boundary=${boundary}` };
}

/** POST /api/backups/upload; `chunked` sends it without a length (so only the file's own size can be judged). */
export function upload(
  url: string,
  token: string,
  archive: Buffer,
  fields: Record<string, string> = {},
  opts: { chunked?: boolean } = {},
): Promise<UploadAnswer> {
  const { body, type } = multipart(fields, archive);
  return new Promise((resolve, reject) => {
    const headers: Record<string, string> = { authorization: `Bearer ${token}`, 'content-type': type };
    if (!opts.chunked) headers['content-length'] = String(body.length);
    const req = request(`${url}/api/backups/upload`, { method: 'POST', headers, agent: false }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (text += c));
      res.on('end', () => resolve({ status: res.statusCode!, text, body: text ? JSON.parse(text) : null }));
    });
    // The agent may close the connection on a refused upload while we still send: its answer is what counts.
    req.on('error', (err) => setTimeout(() => reject(err), 2000));
    Readable.from(chunks(body)).pipe(req);
  });
}

function* chunks(body: Buffer, size = 64 * 1024): Generator<Buffer> {
  for (let i = 0; i < body.length; i += size) yield body.subarray(i, i + size);
}
