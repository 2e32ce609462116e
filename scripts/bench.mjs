// `npm run bench -- <name>`: runs bench/<name>.mjs after building (e.g. `npm run bench -- http`).
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { ROOT, build, ensureDeps, must } from './lib.mjs';

const names = process.argv.slice(2);
const available = readdirSync(join(ROOT, 'bench'))
  .filter((f) => f.endsWith('.mjs') && !f.startsWith('_'))
  .map((f) => f.slice(0, -4));
if (names.length === 0 || names.some((n) => !available.includes(n))) {
  console.error(`usage: npm run bench -- <${available.join('|')}>`);
  process.exit(2);
}
ensureDeps();
build();
for (const name of names) {
  if (!existsSync(join(ROOT, 'bench', `${name}.mjs`))) continue;
  must(process.execPath, [join(ROOT, 'bench', `${name}.mjs`)]);
}
