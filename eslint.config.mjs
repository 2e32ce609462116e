// Lint: the type-aware rules that catch what the compiler does not (a promise nobody awaits or handles, a promise
// where a plain value is expected). Style is Prettier's business (.prettierrc.json), not the linter's.
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['**/dist/**', '**/node_modules/**', '**/*.d.ts', 'data/**', '.test-env/**', 'coverage/**', 'console/types/**'] },
  {
    files: ['{sdk,core,testing,client,cli}/src/**/*.ts', 'plugins/*/src/**/*.ts', 'examples/*/src/**/*.ts', 'console/src/**/*.{ts,tsx}'],
    languageOptions: {
      parser: tseslint.parser,
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    plugins: { '@typescript-eslint': tseslint.plugin },
    linterOptions: { reportUnusedDisableDirectives: 'error' },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': ['error', { checksVoidReturn: { arguments: false, attributes: false } }],
      '@typescript-eslint/await-thenable': 'error',
      'no-control-regex': 'error',
    },
  },
);
