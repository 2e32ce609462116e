// `npm test`: install what is missing, build, bring up the real services the tests use (test/env/up.sh, which
// installs Debian packages as root), run the whole suite with vitest, then stop what up.sh started.
// `npm test -- plugins/deployments` runs a subset.
import { join } from 'node:path';
import { ROOT, build, ensureDeps, must, run } from './lib.mjs';

ensureDeps();
build();
must('bash', [join(ROOT, 'test', 'env', 'up.sh')]);
let code = 1;
try {
  code = run(process.execPath, [join(ROOT, 'node_modules', 'vitest', 'vitest.mjs'), 'run', ...process.argv.slice(2)]);
} finally {
  run('bash', [join(ROOT, 'test', 'env', 'down.sh')]);
}
process.exit(code);
