/**
 * One HTTP exchange with node:http/https. Not `fetch`: its first use loads undici, which costs more than the
 * whole rest of a short CLI call; and redirects are never followed (the token only goes where the user said).
 */
import { request as httpRequest, type IncomingMessage } from 'node:http';
import { request as httpsRequest } from 'node:https';

export interface Exchange {
  method: string;
  headers: Record<string, string>;
  body?: string | Uint8Array;
  signal?: AbortSignal;
}

export interface RawResponse {
  status: number;
  /** Lower-case names; repeated headers joined with `, `. */
  headers: Record<string, string>;
  body: Buffer;
}

export type Transport = (url: URL, exchange: Exchange) => Promise<RawResponse>;

const flatten = (res: IncomingMessage): Record<string, string> =>
  Object.fromEntries(Object.entries(res.headers).flatMap(([k, v]) => (v === undefined ? [] : [[k, Array.isArray(v) ? v.join(', ') : v]])));

export const nodeTransport: Transport = (url, exchange) =>
  new Promise<RawResponse>((resolve, reject) => {
    const send = url.protocol === 'https:' ? httpsRequest : httpRequest;
    const headers = { ...exchange.headers };
    if (exchange.body !== undefined) headers['content-length'] = String(Buffer.byteLength(exchange.body));
    const req = send(url, { method: exchange.method, headers, signal: exchange.signal }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: flatten(res), body: Buffer.concat(chunks) }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(exchange.body);
  });
