export * from './wire-limits.js';
export * from './signing.js';
