// `npm start`: install what is missing, build, run the agent (extra args are passed on, e.g. `-- --config x.yaml`).
import { spawn } from 'node:child_process';
import { AGENT_ENTRY, AGENT_ENV, NODE_FLAGS, build, ensureDeps } from './lib.mjs';

ensureDeps();
build();
const child = spawn(process.execPath, [...NODE_FLAGS, AGENT_ENTRY, ...process.argv.slice(2)], { stdio: 'inherit', env: { ...AGENT_ENV, ...process.env } });
for (const signal of ['SIGINT', 'SIGTERM']) process.on(signal, () => child.kill(signal));
child.on('exit', (code, signal) => process.exit(code ?? (signal ? 1 : 0)));
