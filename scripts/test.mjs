// `npm test`: install what is missing, build, bring up the real services the tests use (test/env/up.sh, which
// installs Debian packages as root), run the whole suite with vitest, then stop what up.sh started.
// `npm test -- plugins/deployments` runs a subset (and skips the format and lint checks, which look at everything).
import { join } from 'node:path';
import { ROOT, build, ensureDeps, must, run } from './lib.mjs';

ensureDeps();
build();
if (process.argv.length <= 2) {
  // Formatting (Prettier) and the type-aware lint rules (ESLint: floating and misused promises) before the suite.
  must(process.execPath, [join(ROOT, 'node_modules', 'prettier', 'bin', 'prettier.cjs'), '--check', '--log-level', 'warn', '.']);
  must(process.execPath, [join(ROOT, 'node_modules', 'eslint', 'bin', 'eslint.js'), '--max-warnings', '0', '.']);
  // The explicit-any budget (.any-budget): the count may only go down.
  must(process.execPath, [join(ROOT, 'scripts', 'any-budget.mjs')]);
}
must('bash', [join(ROOT, 'test', 'env', 'up.sh')]);
let code = 1;
try {
  code = run(process.execPath, [join(ROOT, 'node_modules', 'vitest', 'vitest.mjs'), 'run', ...process.argv.slice(2)]);
} finally {
  run('bash', [join(ROOT, 'test', 'env', 'down.sh')]);
}
process.exit(code);
