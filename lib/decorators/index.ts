export * from './locked.decorator';
export {
  resolveResources,
  checkLockedResources,
  PLACEHOLDER_ROOTS,
} from '../locked/resolve-resources';
export { LOCKED_ORIGINAL, isLockedWrapper } from '../locked/locked-method';
