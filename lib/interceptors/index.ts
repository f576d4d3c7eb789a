export * from './locked.interceptor';
