export { RedlockHealthIndicator } from './redlock.health';
