/** Sessions with a database server: one per request, closed at its end. */
import type { Principal } from '@agent/sdk';
import { resolveConnection, type ResolveDeps } from './connection.js';
import type { ConnectionBody } from './schemas.js';
import type { ConnectionSpec, DbSession } from './types.js';

/** The client libraries (pg, mysql2) are loaded with the first connection, not at agent start. */
export async function openSession(spec: ConnectionSpec): Promise<DbSession> {
  return spec.type === 'postgres' ? (await import('./drivers/postgres.js')).openPostgres(spec) : (await import('./drivers/mysql.js')).openMysql(spec);
}

export async function withSession<T>(spec: ConnectionSpec, fn: (s: DbSession) => Promise<T>): Promise<T> {
  const session = await openSession(spec);
  try {
    return await fn(session);
  } finally {
    await session.close();
  }
}

/** Resolves a request's connection fields for a principal (every check of the connection, no connection yet). */
export type Connect = (body: ConnectionBody, principal: Principal) => Promise<ConnectionSpec>;

export const connector =
  (deps: () => ResolveDeps): Connect =>
  (body, principal) =>
    resolveConnection(body, deps(), principal);
