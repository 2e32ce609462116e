// Shared by the npm scripts: dependency install and build, so `npm start` / `npm test` work on a fresh clone.
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, rmSync, statSync, writeFileSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');

/**
 * Node flags the agent runs with:
 * - a 1 MiB young-generation semi-space instead of 16 MiB. The agent's allocations are small and short-lived;
 *   this saves ~13 MB of resident memory at no measurable cost in throughput.
 * - the old generation may grow by 20 % of what survived the last full collection before the next one (V8 picks
 *   up to 4x on its own, at least 8 MB either way). With small semi-spaces, the objects of requests in flight are
 *   promoted, so under steady load V8's own choice let the heap reach 55–85 MB over ~20 MB of live objects before
 *   collecting: the agent's RSS swung by that much (a soak). With this flag the heap stays at ~33 MB.
 */
export const NODE_FLAGS = ['--max-semi-space-size=1', '--heap-growing-percent=20'];

/**
 * Environment the agent runs with (set before it starts: glibc reads it once, at the first allocation).
 * `MALLOC_MMAP_THRESHOLD_`: blocks of 128 KiB and more are mapped on their own and returned to the system when
 * freed. Without it glibc raises the threshold to the size of the largest block freed so far, and argon2's 19 MiB
 * (one per password hash, in a thread-pool thread) then comes from that thread's malloc arena, where it stays
 * resident once freed: four concurrent logins left the process 76 MB larger for good.
 */
export const AGENT_ENV = { MALLOC_MMAP_THRESHOLD_: '131072' };

export function run(cmd, args, opts = {}) {
  const r = spawnSync(cmd, args, { stdio: 'inherit', cwd: ROOT, ...opts });
  if (r.error) throw r.error;
  return r.status ?? 1;
}

export function must(cmd, args, opts) {
  const code = run(cmd, args, opts);
  if (code !== 0) {
    console.error(`\n${cmd} ${args.join(' ')} failed (exit ${code})`);
    process.exit(code);
  }
}

/** Installs dependencies when node_modules is missing or older than package-lock.json. */
export function ensureDeps() {
  const marker = join(ROOT, 'node_modules', '.package-lock.json');
  const lock = join(ROOT, 'package-lock.json');
  const stale = !existsSync(marker) || (existsSync(lock) && statSync(lock).mtimeMs > statSync(marker).mtimeMs + 1000);
  if (!stale) return;
  console.log('> installing dependencies');
  must('npm', existsSync(lock) ? ['ci', '--no-audit', '--no-fund'] : ['install', '--no-audit', '--no-fund']);
}

/**
 * Every workspace folder with a tsconfig.json: sdk, the client and the CLI first, then core, the test harness and
 * the web console (type-checked only: esbuild bundles it, see `buildConsole`), then plugins and examples.
 */
export function workspaceProjects() {
  const out = ['sdk', 'client', 'cli', 'core', 'testing', 'console'];
  for (const group of ['plugins', 'examples']) {
    const dir = join(ROOT, group);
    if (!existsSync(dir)) continue;
    for (const name of readdirSync(dir).sort()) {
      if (existsSync(join(dir, name, 'tsconfig.json'))) out.push(`${group}/${name}`);
    }
  }
  return out;
}

/** What runs the agent: the core and its dependencies bundled in one file (see `bundleCore`). */
export const AGENT_ENTRY = join(ROOT, 'core', 'dist', 'agent.mjs');
/** Bundled built-in plugins (`<name>.mjs`) and `manifest.json`, which the plugin loader reads. */
export const BUILTIN_BUNDLE_DIR = join(ROOT, 'core', 'dist', 'builtin');

const ESBUILD = join(ROOT, 'node_modules', 'esbuild', 'bin', 'esbuild');
const ESBUILD_COMMON = [
  '--bundle',
  '--splitting',
  '--minify-whitespace',
  '--minify-syntax',
  '--platform=node',
  '--format=esm',
  '--target=node20',
  '--log-level=warning',
  '--legal-comments=none',
  // Native modules and optional native add-ons stay outside (loaded from node_modules when used).
  '--external:better-sqlite3',
  '--external:argon2',
  '--external:cpu-features',
  '--external:pg-native',
  // The scheduler sets luxon's default locale on the copy cron-parser requires (core/src/scheduler).
  '--external:luxon',
  `--alias:ssh2=${join(ROOT, 'scripts', 'shims', 'ssh2-lazy.cjs')}`,
  // CommonJS dependencies inside a bundle still call require() for Node's own modules.
  "--banner:js=import { createRequire as __agentRequire } from 'node:module'; const require = __agentRequire(import.meta.url);",
];

/** Newest modification time of the files under `dir` (a plugin's build output). */
export function newestMtime(dir) {
  let newest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    newest = Math.max(newest, entry.isDirectory() ? newestMtime(path) : statSync(path).mtimeMs);
  }
  return newest;
}

/**
 * Bundles what the agent loads at start, because Node 20 spends most of a start resolving and compiling a few
 * hundred small module files, and a few large files load in a fraction of that time:
 * - the SDK (`sdk/dist/bundle/`, what `@agent/sdk` resolves to): one copy shared by the core, the built-in
 *   plugins and third-party plugins (core checks `instanceof Reply`);
 * - the core (`core/dist/agent.mjs`) and every built-in plugin (`core/dist/builtin/<name>.mjs`) in one build,
 *   so the dependencies they share are loaded once (split into chunks; dynamic imports load on first use).
 * The manifest records how new each plugin's build was when bundled: the loader falls back to a plugin's own
 * `dist/` when it was rebuilt since (e.g. `tsc -p plugins/x` alone), so a stale bundle is never run.
 */
export function bundleCore() {
  must(ESBUILD, [
    `index=${join(ROOT, 'sdk', 'dist', 'index.js')}`,
    `app=${join(ROOT, 'sdk', 'dist', 'app.js')}`,
    // @agent/sdk/testing: declares the test harness and loads it (`@agent/testing`) when called.
    `testing=${join(ROOT, 'sdk', 'dist', 'testing.js')}`,
    ...ESBUILD_COMMON,
    `--outdir=${join(ROOT, 'sdk', 'dist', 'bundle')}`,
    '--out-extension:.js=.mjs',
    '--chunk-names=chunks/[name]-[hash]',
  ]);
  const plugins = existsSync(join(ROOT, 'plugins'))
    ? readdirSync(join(ROOT, 'plugins'))
        .sort()
        .filter((n) => existsSync(join(ROOT, 'plugins', n, 'dist', 'index.js')))
    : [];
  const manifest = Object.fromEntries(plugins.map((n) => [n, { file: `${n}.mjs`, built: newestMtime(join(ROOT, 'plugins', n, 'dist')) }]));
  rmSync(BUILTIN_BUNDLE_DIR, { recursive: true, force: true });
  rmSync(join(ROOT, 'core', 'dist', 'chunks'), { recursive: true, force: true });
  must(ESBUILD, [
    `agent=${join(ROOT, 'core', 'dist', 'main.js')}`,
    ...plugins.map((n) => `builtin/${n}=${join(ROOT, 'plugins', n, 'dist', 'index.js')}`),
    ...ESBUILD_COMMON,
    `--outdir=${join(ROOT, 'core', 'dist')}`,
    '--out-extension:.js=.mjs',
    '--chunk-names=chunks/[name]-[hash]',
    '--external:@agent/sdk',
    '--external:@agent/sdk/*',
  ]);
  writeFileSync(join(BUILTIN_BUNDLE_DIR, 'manifest.json'), JSON.stringify(manifest, null, 2) + '\n');
  // The in-process test harness (`@agent/testing`, what `@agent/sdk/testing` loads): it and the kernel in a file of
  // their own, loaded in half the time of their module files; a build of its own leaves the agent's bundle as it was.
  rmSync(join(ROOT, 'core', 'dist', 'testing.mjs'), { force: true });
  must(ESBUILD, [
    join(ROOT, 'testing', 'dist', 'index.js'),
    ...ESBUILD_COMMON.filter((arg) => arg !== '--splitting'),
    `--outfile=${join(ROOT, 'testing', 'dist', 'harness.mjs')}`,
    '--external:@agent/sdk',
    '--external:@agent/sdk/*',
  ]);
}

/** Regenerates the solution tsconfig from the workspaces, runs `tsc -b`, then bundles the core. */
export function build() {
  const references = workspaceProjects().map((path) => ({ path }));
  const next = JSON.stringify({ files: [], references }, null, 2) + '\n';
  const path = join(ROOT, 'tsconfig.json');
  if (!existsSync(path) || readFileSync(path, 'utf8') !== next) writeFileSync(path, next);
  console.log('> building');
  must(process.execPath, [join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc'), '-b']);
  bundleCore();
  buildConsole();
}

/** The web console (`console/dist`, served at / by plugins/console): esbuild, hashed and precompressed files. */
export function buildConsole() {
  must(process.execPath, [join(ROOT, 'console', 'build.mjs')]);
}
