/**
 * `@agent/client`: the typed client of the agent's API, driven by its live description. `agentctl` is built
 * on it; scripts and tools can use it directly:
 *
 *   const client = new AgentClient({ url, token });
 *   const { description } = await loadDescription(client);
 *   const op = description.find('deployments', 'list');
 */
export { AgentClient, normaliseUrl } from './agent-client.js';
export type { AgentClientOptions, AgentResponse, QueryValue, RequestOptions } from './agent-client.js';
export { nodeTransport } from './transport.js';
export type { Exchange, RawResponse, Transport } from './transport.js';
export { AgentApiError, AgentConnectionError, RequestInvalidError } from './errors.js';
export { followStream } from './stream.js';
export type { FollowOptions } from './stream.js';
export { ApiDescription, fillPath, isJobReader, kebab, startsJob } from './description.js';
export { callOperation } from './call-operation.js';
export type { OperationInput } from './call-operation.js';
export type { GroupInfo, Operation, OperationParameter } from './description.js';
export { acceptedTypes, constraints, derefSchema, enumValues, listFields, nonNull, schemaAt, typeLabel } from './json-schema.js';
export type { FieldInfo, JsonSchema } from './json-schema.js';
export { leftoverPlaceholders, suggest, validateBody, validateParameters } from './validate.js';
export { buildBody, coerceValue, parseDocument, splitKey } from './body.js';
export type { BuildBodyInput } from './body.js';
export { skeletonJson, skeletonValue, skeletonYaml } from './skeleton.js';
export { changeLines, diffTexts, planTotals } from './plan-diff.js';
export type { DiffLine, DiffMark } from './plan-diff.js';
export { DEFAULT_PROFILE, ProfileStore, cacheDir, configDir, checkProfileName, resolveConnection } from './profiles.js';
export type { Connection, ConnectionInput, Profile, ProfileFile } from './profiles.js';
export { DescriptionCache } from './description-cache.js';
export type { CachedDescription } from './description-cache.js';
export { DEFAULT_DESCRIPTION_MAX_AGE_MS, loadDescription } from './load-description.js';
export type { LoadOptions, LoadedDescription } from './load-description.js';
export type * from './types.js';
