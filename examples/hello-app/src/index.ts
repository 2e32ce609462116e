/**
 * hello-app: an app plugin. The agent's apps plugin runs `dist/app.js` as a separate process and restarts it if it
 * dies; the core serves it at `/api/plugin/hello-app/…`, forwarding only the routes declared here, after
 * authentication and the permission check.
 */
import { definePlugin, Type } from '@agent/sdk';

export default definePlugin({
  name: 'hello-app',
  version: '1.0.0',
  description: 'Notes kept by a separate process behind the plugin proxy',
  resources: { notes: { description: 'notes of the hello-app example', operator: 'write', viewer: 'read' } },
  app: {
    entry: 'dist/app.js',
    routes: [
      {
        method: 'GET',
        path: '/whoami',
        permission: 'authenticated',
        operationId: 'hello-app.whoami',
        tenancy: 'own',
        summary: 'The principal the app received',
      },
      {
        method: 'GET',
        path: '/notes',
        permission: 'notes:read',
        operationId: 'hello-app.notes',
        tenancy: 'filtered',
        summary: 'List notes (only those of deployments you can see)',
        response: Type.Array(Type.Object({ id: Type.Integer(), text: Type.String(), deployment: Type.String() })),
      },
      {
        method: 'POST',
        path: '/notes',
        permission: 'notes:write',
        operationId: 'hello-app.addNote',
        tenancy: 'filtered',
        summary: 'Add a note',
        status: 201,
        body: Type.Object({ text: Type.String({ minLength: 1, maxLength: 500 }), deployment: Type.String() }),
      },
      {
        method: 'GET',
        path: '/notes/:id',
        permission: 'notes:read',
        operationId: 'hello-app.note',
        tenancy: 'filtered',
        summary: 'One note',
        params: Type.Object({ id: Type.Integer({ minimum: 1 }) }),
      },
      { method: 'GET', path: '/agent', permission: 'notes:read', operationId: 'hello-app.agent', summary: 'Calls the agent back with the app token' },
      { method: 'POST', path: '/crash', permission: 'notes:write', operationId: 'hello-app.crash', summary: 'Exit the app process (supervision demo)' },
      { method: 'GET', path: '/echo', permission: 'notes:read', operationId: 'hello-app.echo', tenancy: 'own', summary: 'Websocket echo' },
    ],
  },
  setup() {},
});
