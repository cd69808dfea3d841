// Lint like Temporal's samples: promises are awaited, type-only imports are
// marked, no import cycles, and workflow code imports no Node built-ins and no
// activity implementations (they would break determinism or the bundle). In
// src/, no regular expression may backtrack super-linearly: annotations a
// tenant writes reach the parsers (up to 256 KiB), and a quadratic pattern
// held the api's event loop for seconds.
import js from '@eslint/js';
import regexp from 'eslint-plugin-regexp';
import tseslint from 'typescript-eslint';
import { importX } from 'eslint-plugin-import-x';
import { builtinModules } from 'node:module';

const nodeBuiltins = [...builtinModules, ...builtinModules.map((m) => `node:${m}`)];

export default tseslint.config(
  { ignores: ['node_modules', 'dist', 'coverage', '.data', 'tools', 'test/fixtures'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    files: ['**/*.ts'],
    languageOptions: { parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname } },
    plugins: { 'import-x': importX },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/consistent-type-imports': ['error', { fixStyle: 'inline-type-imports' }],
      '@typescript-eslint/no-explicit-any': 'error',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      'import-x/no-cycle': 'error',
      // A handler installed before start-up reads a variable assigned after it.
      'prefer-const': ['error', { ignoreReadBeforeAssign: true }],
    },
  },
  {
    files: ['src/**/*.ts'],
    plugins: { regexp },
    rules: {
      'regexp/no-super-linear-backtracking': 'error',
      'regexp/no-super-linear-move': 'error',
    },
  },
  {
    files: ['src/workflows/**/*.ts'],
    rules: {
      '@typescript-eslint/no-restricted-imports': [
        'error',
        {
          paths: nodeBuiltins.map((name) => ({
            name,
            message: 'Workflow code must be deterministic: no Node built-ins.',
          })),
          patterns: [
            {
              group: [
                '**/activities/*',
                '**/platform/**',
                '@temporalio/activity',
                '@temporalio/worker',
                '@temporalio/client',
                '@kubernetes/*',
              ],
              allowTypeImports: true,
              message: 'Workflows reach activities through proxyActivities; import their types only.',
            },
          ],
        },
      ],
    },
  },
  { files: ['**/*.js'], languageOptions: { globals: { console: 'readonly', process: 'readonly' } } },
);
