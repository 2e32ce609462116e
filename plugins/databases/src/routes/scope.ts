/**
 * The deployment a request connects to. With one, the core checks the caller's level on it (read for the reading
 * routes, write for the others); without one (the host form) the route is global: 403 GLOBAL_SCOPE_REQUIRED to a
 * principal limited to its deployments, whose connections only go to its deployments' services.
 */
import type { RouteRequest } from '@agent/sdk';

const deploymentOf = (req: Pick<RouteRequest, 'body'>) => (req.body as { deployment?: string } | undefined)?.deployment;

export const reading = { tag: 'databases', deployment: deploymentOf, deploymentLevel: 'read' as const };
export const writing = { tag: 'databases', deployment: deploymentOf, deploymentLevel: 'write' as const };
