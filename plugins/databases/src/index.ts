/**
 * databases: administration of MySQL, MariaDB and PostgreSQL servers over their own protocols (mysql2, pg).
 * Every route is a POST whose body carries the connection; one connection per request.
 */
import { definePlugin, mergeErrors, optional } from '@agent/sdk';
import { deploymentsService } from '@agent/plugin-deployments/api';
import { dockerService, ENGINE_ERRORS } from '@agent/plugin-docker/api';
import { DRIVER_ERRORS } from './db-errors.js';
import { databaseChecks } from './doctor.js';
import { databaseOperations } from './operations/databases.js';
import { queryOperations } from './operations/query.js';
import { connectionRoutes } from './routes/connection.js';
import { databaseRoutes } from './routes/databases.js';
import { queryRoutes } from './routes/query.js';
import { userRoutes } from './routes/users.js';
import { connector } from './session.js';

export default definePlugin({
  name: 'databases',
  version: '0.1.0',
  description: 'Databases: test, list, tables, query, create database/user, grant (MySQL, MariaDB, PostgreSQL)',
  resources: {
    databases: {
      description:
        "database servers reached through the agent (queries, databases, users, grants): a deployment's database services belong to it, any other server (the host form) is global",
      operator: 'write',
      viewer: 'none',
      owner: 'both',
    },
  },
  deps: { deployments: optional(deploymentsService), docker: optional(dockerService) },
  // Every route connects (connection.ts: a deployment's service is found through the docker service, the host form
  // resolved and checked) and runs statements whose failures the drivers map (db-errors.ts).
  errors: mergeErrors(ENGINE_ERRORS, DRIVER_ERRORS, {
    404: ['SERVICE_NOT_FOUND'],
    409: ['SERVICE_NOT_RUNNING', 'SERVICE_UNREACHABLE'],
    503: ['DEPLOYMENTS_UNAVAILABLE'],
  }),

  setup(ctx, deps) {
    const connect = connector(() => ({ deployments: deps.deployments, docker: deps.docker }));
    for (const check of databaseChecks()) ctx.doctor(check);
    // The changes (and the query, which may write) are operations (src/operations); the routes (src/routes) run them.
    const ops = databaseOperations(connect);
    connectionRoutes(ctx, connect);
    databaseRoutes(ctx, connect, ops);
    queryRoutes(ctx, queryOperations(ctx, connect));
    userRoutes(ctx, ops);
  },
});
