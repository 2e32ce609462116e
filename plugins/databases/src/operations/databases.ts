/**
 * The changes of a database server as operations: create a database, create a user, grant privileges. `prepare`
 * runs the checks made without the server (the caller's reach, the connection, fields that do not fit the engine)
 * and resolves the connection; `apply` opens the one session of the request and makes the change. The server is the
 * only authority on what exists on it: a database that already exists is found in that same session, just before
 * the create (asked in a session of its own, the answer would be as old, and the request would connect twice).
 */
import { defineOperation, errors } from '@agent/sdk';
import { withSession, type Connect } from '../session.js';
import { CreateDatabaseBody, CreateUserBody, GrantBody } from '../schemas.js';
import type { ConnectionSpec } from '../types.js';

export type DatabaseOperations = ReturnType<typeof databaseOperations>;

const server = (spec: ConnectionSpec) => `${spec.type}://${spec.host}:${spec.port}`;

export function databaseOperations(connect: Connect) {
  const createDatabase = defineOperation({
    name: 'databases.createDatabase',
    input: CreateDatabaseBody,
    resource: (input) => ({ type: 'database', id: input.name }),
    prepare: async (input, { principal }) => {
      const spec = await connect(input, principal);
      const { name, charset, collation, owner } = input;
      if (owner && spec.type !== 'postgres') throw errors.badRequest('owner: only for PostgreSQL', 'VALIDATION_FAILED', { field: 'owner' });
      const options = { charset: charset ?? null, collation: collation ?? null, owner: owner ?? null };
      return {
        value: { spec, name, options },
        preview: { summary: `create database '${name}' on ${server(spec)}`, changes: [{ type: 'database', id: name, actions: ['create'], after: options }] },
      };
    },
    apply: async ({ spec, name, options }) => {
      await withSession(spec, async (s) => {
        const existing = await s.listDatabases();
        if (existing.some((d) => d.name === name)) throw errors.conflict(`database '${name}' already exists`, 'DB_EXISTS');
        await s.createDatabase(name, options);
      });
      return { name, type: spec.type };
    },
  });

  const createUser = defineOperation({
    name: 'databases.createUser',
    input: CreateUserBody,
    resource: (input) => ({ type: 'database-user', id: input.user }),
    prepare: async (input, { principal }) => {
      const spec = await connect(input, principal);
      const { user, user_password } = input;
      if (user_password.includes('\0'))
        throw errors.badRequest('user_password: must not contain NUL characters', 'VALIDATION_FAILED', { field: 'user_password' });
      const host = spec.type === 'postgres' ? null : (input.user_host ?? '%');
      return {
        value: { spec, user, password: user_password, host },
        // The password is a secret: the change names the account only.
        preview: {
          summary: `create user '${user}' on ${server(spec)}`,
          changes: [{ type: 'database-user', id: user, actions: ['create'], after: { user, host } }],
        },
      };
    },
    apply: async ({ spec, user, password, host }) => {
      await withSession(spec, (s) => s.createUser(user, password, host ?? ''));
      return { user, host, type: spec.type };
    },
  });

  const grant = defineOperation({
    name: 'databases.grant',
    input: GrantBody,
    resource: (input) => ({ type: 'database-user', id: input.user }),
    prepare: async (b, { principal }) => {
      const spec = await connect(b, principal);
      const host = spec.type === 'postgres' ? null : (b.user_host ?? '%');
      const grant = {
        user: b.user,
        host: host ?? '',
        database: b.database,
        schema: b.schema ?? 'public',
        table: b.table ?? null,
        privileges: b.privileges,
        with_grant_option: b.with_grant_option ?? false,
      };
      // PostgreSQL table grants are made from inside the target database.
      const target = spec.type === 'postgres' ? { ...spec, database: b.database } : spec;
      return {
        value: { target, grant, host },
        preview: {
          summary: `grant ${b.privileges.join(', ')} to '${b.user}' on ${server(spec)}`,
          changes: [{ type: 'database-user', id: b.user, actions: ['update'], after: grant }],
        },
      };
    },
    apply: async ({ target, grant, host }) => {
      const statements = await withSession(target, (s) => s.grant(grant));
      return { user: grant.user, host, database: grant.database, table: grant.table, privileges: grant.privileges, statements };
    },
  });

  return { createDatabase, createUser, grant };
}
