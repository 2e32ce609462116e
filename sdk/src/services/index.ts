export * from './docker.js';
export * from './deployments.js';
export * from './credentials.js';
export * from './notifications.js';
