export * from './locked.decorator';
export { resolveResources, checkLockedResources, PLACEHOLDER_ROOTS } from './resolve-resources';
export { LOCKED_ORIGINAL, isLockedWrapper } from './locked-method';
