/** Where backups can go: a catalogue of destination names (details for global principals only). */
import { Type, type PluginContext } from '@agent/sdk';
import { storeView, type StoreRegistry } from '../s3/stores.js';

export function registerDestinationRoutes(ctx: PluginContext, stores: StoreRegistry, archiveDir: string): void {
  ctx.route({
    method: 'GET',
    path: '/backup-destinations',
    permission: 'backups:read',
    operationId: 'backups.destinations',
    summary: 'Where backups can go: the local folder and every object store (external and managed)',
    description:
      "A catalogue: every principal may choose a destination for its deployments' backups by name. Endpoints, buckets " +
      'and the local folder are global details: principals limited to their deployments get them as null.',
    tenancy: 'catalogue',
    response: Type.Array(
      Type.Object({
        name: Type.String(),
        type: Type.Union([Type.Literal('local'), Type.Literal('external'), Type.Literal('managed')]),
        endpoint: Type.Union([Type.String(), Type.Null()]),
        bucket: Type.Union([Type.String(), Type.Null()]),
        path: Type.Union([Type.String(), Type.Null()]),
      }),
    ),
    handler: (req) => {
      const details = req.principal.isGlobal;
      return [
        { name: 'local', type: 'local' as const, endpoint: null, bucket: null, path: details ? archiveDir : null },
        ...stores.list().map((s) => {
          const v = storeView(s);
          return { name: v.name, type: v.type, endpoint: details ? v.endpoint : null, bucket: details ? v.bucket : null, path: null };
        }),
      ];
    },
  });
}
