export * from './wire-limits.js';
export * from './signing.js';
export * from './event-errors.js';
export * from './event-paths.js';
export * from './event-schema.js';
export * from './enum-messages.js';
