/**
 * nestjs-redlock public API.
 * @packageDocumentation
 */
export * from './core';
