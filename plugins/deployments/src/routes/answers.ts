/**
 * The answers of deployments routes that come from what they call (for their `errors`): the deployment's folder,
 * compose through the docker plugin's guard. Each route adds its own.
 */
import { mergeErrors, type ErrorCodes } from '@agent/sdk';
import { COMPOSE_ERRORS } from '@agent/plugin-docker/api';

/** Reading a deployment's files (files.ts): never through a symbolic link. */
export const FILE_ERRORS: ErrorCodes = { 409: ['UNSAFE_FILE'] };

/** Checking a deployment's files as compose reads them (the guard, on the engine), without running anything. */
export const CHECK_ERRORS: ErrorCodes = mergeErrors(COMPOSE_ERRORS, FILE_ERRORS);

/** Running compose for a deployment: its files checked, and compose failing (with its output). */
export const COMPOSE_RUN_ERRORS: ErrorCodes = mergeErrors(CHECK_ERRORS, { 502: ['COMPOSE_FAILED'] });
