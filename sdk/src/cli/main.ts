#!/usr/bin/env node
/** `agentctl`: see program.ts. */
import { run } from './program.js';

run(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (err: unknown) => {
    process.stderr.write(`agentctl: ${(err as Error)?.stack ?? String(err)}\n`);
    process.exitCode = 1;
  },
);
