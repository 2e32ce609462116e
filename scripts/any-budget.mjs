// The `any` budget: typescript-eslint's no-explicit-any over the source (not the tests), counted against the number
// committed in `.any-budget`. The count may only go down: more fails the check; fewer asks to lower the budget.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ESLint } from 'eslint';
import tseslint from 'typescript-eslint';
import { ROOT } from './lib.mjs';

const budget = Number(readFileSync(join(ROOT, '.any-budget'), 'utf8').trim());
// Its own config (the rule needs no type information, so no project service: seconds, not half a minute).
const eslint = new ESLint({
  cwd: ROOT,
  overrideConfigFile: true,
  overrideConfig: [
    { ignores: ['**/dist/**', '**/node_modules/**', '**/*.d.ts'] },
    {
      files: ['**/*.ts'],
      languageOptions: { parser: tseslint.parser },
      plugins: { '@typescript-eslint': tseslint.plugin },
      rules: { '@typescript-eslint/no-explicit-any': 'warn' },
    },
  ],
});
const results = await eslint.lintFiles(['{sdk,core,testing,client,cli}/src/**/*.ts', 'plugins/*/src/**/*.ts', 'examples/*/src/**/*.ts']);
const found = results.flatMap((r) =>
  r.messages.filter((m) => m.ruleId === '@typescript-eslint/no-explicit-any').map((m) => `${r.filePath.slice(ROOT.length + 1)}:${m.line}`),
);
if (found.length > budget) {
  console.error(`explicit any: ${found.length}, over the budget of ${budget}. New ones, among:\n${found.slice(-20).join('\n')}`);
  process.exit(1);
}
if (process.argv.includes('--list')) console.log(found.join('\n'));
console.log(`explicit any: ${found.length} (budget ${budget})${found.length < budget ? `: lower .any-budget to ${found.length}` : ''}`);
