/**
 * The better-sqlite3 build the agent loads, chosen by the Node-API level of the running Node.js:
 * - `better-sqlite3-napi` (better-sqlite3 13, an alias in package.json) where Node-API 10 exists (Node.js 22.14+ and
 *   24): a Node-API addon with prebuilt binaries. better-sqlite3 11 and 12 cannot run on Node.js 24: their `Statement`
 *   is a `node::ObjectWrap`, whose destructor, compiled against Node.js 24.19+ headers, removes an environment
 *   cleanup hook and aborts the process (`RemoveEnvironmentCleanupHook: Assertion failed: (env) != nullptr`) when
 *   the garbage collector finalises a statement outside JavaScript.
 * - `better-sqlite3` (11, built from source at install) elsewhere: the 13 build asks for Node-API 10, which Node.js
 *   20 never got, and crashes there (segmentation fault at the first `new Database()`).
 * Both have the same API; `@types/better-sqlite3` describes them. The observability app has the same choice in
 * plugins/observability/src/app/sqlite.ts (it runs in its own process, from its own package).
 */
import { createRequire } from 'node:module';
import type BetterSqlite3 from 'better-sqlite3';

export const SQLITE_PACKAGE = Number(process.versions.napi) >= 10 ? 'better-sqlite3-napi' : 'better-sqlite3';

// A require of a name chosen at run time: the bundler leaves it alone and Node resolves it from node_modules.
export const Database = createRequire(import.meta.url)(SQLITE_PACKAGE) as typeof BetterSqlite3;
