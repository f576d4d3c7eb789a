/**
 * `nestjs-redlock/testing`: test Nest applications that use locks without Redis.
 * @packageDocumentation
 */
export { RedlockTestingModule } from './redlock-testing.module';
export type { RedlockTestingModuleOptions } from './redlock-testing.module';
export { RedlockTestingController } from './redlock-testing.controller';
export { InMemoryRedlock } from './in-memory-redlock';
export type { InMemoryRedlockSettings, InMemoryHolder } from './in-memory-redlock';
