/**
 * The answers of backups routes that come from what they call (for their `errors`): an object store, the services
 * of other plugins. Each route adds its own.
 */
import { mergeErrors, type ErrorCodes } from '@agent/sdk';
import { COMPOSE_ERRORS, ENGINE_ERRORS } from '@agent/plugin-docker/api';

/** A store name nobody registered (s3/stores.ts), and what a call to a store answers (s3/client.ts `s3Error`). */
export const STORE_ERRORS: ErrorCodes = {
  400: ['VALIDATION_FAILED'],
  404: ['OBJECT_STORE_NOT_FOUND', 'BUCKET_NOT_FOUND', 'OBJECT_NOT_FOUND'],
  409: ['BUCKET_EXISTS', 'BUCKET_NOT_EMPTY'],
  502: ['OBJECT_STORE_AUTH_FAILED', 'OBJECT_STORE_ERROR', 'OBJECT_STORE_UNREACHABLE'],
};

/** The deployments or docker plugin is not enabled (index.ts `need`). */
export const SERVICES_MISSING: ErrorCodes = { 503: ['SERVICE_UNAVAILABLE'] };

/**
 * What the deployments service answers a change of a deployment (create, remove, environment: its manager checks the
 * name and runs compose through the docker service's guard), and the docker calls of a managed store.
 */
export const DEPLOYMENT_CHANGE_ERRORS: ErrorCodes = mergeErrors(COMPOSE_ERRORS, ENGINE_ERRORS, SERVICES_MISSING, {
  400: ['NAME_RESERVED'],
  409: ['DEPLOYMENT_EXISTS', 'NAME_IN_USE'],
  502: ['COMPOSE_FAILED'],
});
