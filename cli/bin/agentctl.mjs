#!/usr/bin/env node
// The `agentctl` command. npm links a package's bins when it installs the package, which on a fresh clone is
// before the build creates dist/: this committed file exists from the start and loads the built CLI.
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const main = new URL('../dist/main.js', import.meta.url);
if (!existsSync(fileURLToPath(main))) {
  process.stderr.write('agentctl: the CLI is not built yet; run `npm run build` (or `npm start`) in the repository first\n');
  process.exit(1);
}
await import(main.href);
