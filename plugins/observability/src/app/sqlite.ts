/**
 * The better-sqlite3 build the app loads, by the Node-API level of the running Node.js, as the agent chooses in
 * core/src/store/sqlite.ts (see there why): better-sqlite3 13 (`better-sqlite3-napi`) where Node-API 10 exists
 * (Node.js 22.14+, 24), better-sqlite3 11 on Node.js 20, where the 13 build cannot load and 11 is the one that works.
 */
import { createRequire } from 'node:module';
import type BetterSqlite3 from 'better-sqlite3';

export const SQLITE_PACKAGE = Number(process.versions.napi) >= 10 ? 'better-sqlite3-napi' : 'better-sqlite3';

// A require of a name chosen at run time, resolved by Node from node_modules.
export const Database = createRequire(import.meta.url)(SQLITE_PACKAGE) as typeof BetterSqlite3;
