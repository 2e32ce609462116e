export * from './docker.js';
export * from './deployments.js';
export * from './credentials.js';
export * from './notifications.js';
export * from './observability.js';
export * from './backups.js';
export * from './infrastructure.js';
