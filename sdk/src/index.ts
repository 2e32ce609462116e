export { definePlugin, optional } from './plugin.js';
export type {
  PluginDefinition,
  AnyPluginDefinition,
  PluginContext,
  PluginInstance,
  Dependency,
  OptionalDependency,
  ResolvedDeps,
  ProvidedServices,
  Logger,
  ResourceDeclaration,
  AgentInfo,
  DeployableDefinition,
} from './plugin.js';
export { Reply, reply } from './http.js';
export type {
  HttpMethod,
  Tenancy,
  RouteRequest,
  RouteSpec,
  UploadedFile,
  RequestOf,
  StreamOptions,
  PlanAction,
  PlanChange,
  PlanPreview,
  PlanSnapshot,
  PlanSupport,
  WebSocketSpec,
  WebSocketConnection,
  HttpMiddleware,
  SiteSpec,
  ErrorCodes,
} from './http.js';
export { HttpError, isHttpError, errors, mergeErrors } from './errors.js';
export { principalFrom, levelRank, lowerLevel, ROLES, ACCESS_LEVELS, SCOPES } from './principal.js';
export type { Principal, PrincipalInfo, Permission, Access, AccessLevel, Role, PrincipalType, Scope } from './principal.js';
export { createServiceRef } from './services.js';
export { defineOperation, operationRoute } from './operations.js';
export type { Operation, OperationSpec, OperationCaller, Prepared } from './operations.js';
export type { ServiceRef } from './services.js';
export type { AgentEvents, EventName, EventBus } from './events.js';
export type { Document, PluginStore, SqlDatabase, SqlStatement, Sealer } from './store.js';
export type { JobSpec, JobHandle, JobExecution, JobRunContext, Scheduler } from './jobs.js';
export { coreServices } from './core-services.js';
export { principalDirectory } from './principal-directory.js';
export type { PrincipalDirectory, AuthKernel, ResourceCatalogue, TokenClaims } from './principal-directory.js';
export { auditSink } from './audit.js';
export type { AuditSink, AuditEventInput } from './audit.js';
export { appDirectory } from './app-plugins.js';
export type { AppDefinition, AppRouteSpec, AppPlugin, AppDirectory, AppState } from './app-plugins.js';
export type { ResourcePolicy, SettingsRegistry, SettingDefinition, PluginSettings, PluginDirectory, DeployableOffer } from './core-services.js';
export type { CheckStatus, CheckResult, DoctorCheck, DoctorCheckReport, DoctorReport } from './doctor.js';
export * from './schema.js';
export * from './tenancy.js';
export { cjsExports } from './modules.js';
export { compareText } from './text.js';
export { Dir, emptyDir, removeInside, isInside, openInside, readTextInside, componentsOf, unsafeFile, UNSAFE_FILE, O_PATH } from './tree.js';
