export * from './resource-locked.error';
export * from './lock-unavailable.error';
export * from './transport.error';
