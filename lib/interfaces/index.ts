export * from './lock-context.interface';
export * from './locked-options.interface';
export * from './redlock-module-options.interface';
