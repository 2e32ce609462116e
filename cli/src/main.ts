#!/usr/bin/env node
/** `agentctl`: see program.ts. */
import module from 'node:module';

// Node 22+ caches compiled modules between runs (most of a short CLI call is loading code); a no-op on Node 20.
(module as { enableCompileCache?: () => unknown }).enableCompileCache?.();
const { run } = await import('./program.js');

// A reader that stops early (`agentctl --help | head`) closes the pipe: that ends the output, it is not a failure.
process.stdout.on('error', (err: NodeJS.ErrnoException) => {
  if (err.code === 'EPIPE') process.exit(0);
  throw err;
});

run(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (err: unknown) => {
    process.stderr.write(`agentctl: ${(err as Error)?.stack ?? String(err)}\n`);
    process.exitCode = 1;
  },
);
