/**
 * `vitest` for the README's testing example when the doc-test runs it under jest
 * (jest.config.js maps the name here): the same functions, from jest.
 */
export {
  afterAll,
  afterEach,
  beforeAll,
  beforeEach,
  describe,
  expect,
  it,
  test,
} from '@jest/globals';
