/** @type {import('jest').Config} */
const base = {
  // Nest 12 publishes ES modules only, so the suites run in jest's ESM mode (`npm test` starts
  // node with --experimental-vm-modules): our TypeScript is compiled to ES modules as well and
  // Nest is loaded as the real ESM packages an application gets.
  extensionsToTreatAsEsm: ['.ts'],
  transform: { '^.+\\.ts$': ['ts-jest', { tsconfig: 'tsconfig.jest.json', useESM: true }] },
  testEnvironment: 'node',
  moduleFileExtensions: ['ts', 'js', 'json'],
  // `Symbol.asyncDispose` in each test file's sandbox (`await using`): see the file.
  setupFiles: ['<rootDir>/test/harness/disposable-symbols.ts'],
};

module.exports = {
  // Every suite starts its own redis-server processes; two workers match the 2-core CI machine.
  maxWorkers: 2,
  // Records the redis-servers each run starts and kills any survivor at the end (a second line
  // of defence: each server already dies with the process that started it).
  globalSetup: '<rootDir>/test/harness/global-setup.ts',
  globalTeardown: '<rootDir>/test/harness/global-teardown.ts',
  projects: [
    { ...base, displayName: 'unit', testMatch: ['<rootDir>/test/unit/**/*.spec.ts'] },
    {
      ...base,
      displayName: 'integration',
      testMatch: ['<rootDir>/test/core/**/*.spec.ts', '<rootDir>/test/nest/**/*.spec.ts'],
    },
    {
      ...base,
      displayName: 'e2e',
      testMatch: ['<rootDir>/test/e2e/**/*.spec.ts'],
    },
    // The shared client suite (test/clients/client-suite.ts), once per client library.
    { ...base, displayName: 'clients', testMatch: ['<rootDir>/test/clients/**/*.spec.ts'] },
    // The fault, quarantine, hand-off and protocol suites once more on ioredis 5 (RESP2), which
    // the package supports next to ioredis 6 (RESP3); `ioredis5` is ioredis 5 under an alias.
    {
      ...base,
      displayName: 'ioredis5',
      moduleNameMapper: {
        '^ioredis$': 'ioredis5',
        '^ioredis/package\\.json$': 'ioredis5/package.json',
      },
      testMatch: [
        '<rootDir>/test/core/faults.spec.ts',
        '<rootDir>/test/core/quarantine.spec.ts',
        '<rootDir>/test/core/handoff.spec.ts',
        '<rootDir>/test/core/protocols.spec.ts',
        '<rootDir>/test/core/kinds-replies.spec.ts',
      ],
    },
    // The documentation's code blocks: compiled as a user's app, the README's app run
    // (test/docs/doc-snippets.spec.ts); the package's names point at lib/, and the `.js` of an ES
    // module app's relative imports at the TypeScript files they name.
    {
      ...base,
      displayName: 'docs',
      testMatch: ['<rootDir>/test/docs/**/*.spec.ts'],
      moduleNameMapper: {
        '^nestjs-redlock$': '<rootDir>/lib/index.ts',
        '^nestjs-redlock/(testing|health)$': '<rootDir>/lib/$1/index.ts',
        '^vitest$': '<rootDir>/test/docs/vitest-shim.ts',
        '^(\\.{1,2}/.*)\\.js$': '$1',
      },
    },
    // npm pack + install into a fresh app + compile + boot (about a minute).
    { ...base, displayName: 'package', testMatch: ['<rootDir>/test/package/**/*.spec.ts'] },
    // A short multi-process safety soak with fault injection (npm run test:safety runs longer ones).
    { ...base, displayName: 'safety', testMatch: ['<rootDir>/test/safety/**/*.spec.ts'] },
  ],
  testTimeout: 60000,
};
