// `npm start`: install what is missing, build, run the agent (extra args are passed on, e.g. `-- --config x.yaml`).
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { NODE_FLAGS, ROOT, build, ensureDeps } from './lib.mjs';

ensureDeps();
build();
const child = spawn(process.execPath, [...NODE_FLAGS, join(ROOT, 'core', 'dist', 'main.js'), ...process.argv.slice(2)], { stdio: 'inherit' });
for (const signal of ['SIGINT', 'SIGTERM']) process.on(signal, () => child.kill(signal));
child.on('exit', (code, signal) => process.exit(code ?? (signal ? 1 : 0)));
