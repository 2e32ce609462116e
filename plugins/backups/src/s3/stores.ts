/**
 * Registered object stores (external or managed on this host). Kept in an encrypted document: credentials are
 * sealed at rest and never leave through a response.
 */
import { errors, Type, type Document, type PluginStore, type Static } from '@agent/sdk';
import { ObjectStoreClient, type S3Endpoint } from './client.js';

export const STORE_NAME = '^[a-z0-9][a-z0-9-]{0,39}$';

export interface StoreRecord extends S3Endpoint {
  name: string;
  /** Default bucket for backups uploaded to this store (created on first upload). */
  bucket: string;
  /** Key prefix for backups in that bucket. */
  prefix: string;
  managed: null | {
    deployment: string;
    service: string;
    /** Endpoint as containers reach it on the store's network. */
    internal_endpoint: string;
    network: string;
    alias: string;
  };
  /** Deployments given this store's endpoint and credentials. */
  attachments: { deployment: string; bucket: string; prefix: string; attached_at: string }[];
  created_at: string;
}

export const StoreView = Type.Object({
  name: Type.String(),
  type: Type.Union([Type.Literal('external'), Type.Literal('managed')]),
  endpoint: Type.String(),
  region: Type.String(),
  path_style: Type.Boolean(),
  bucket: Type.String(),
  prefix: Type.String(),
  access_key_id_hint: Type.String({ description: 'first characters of the access key id; the secret is never returned' }),
  deployment: Type.Union([Type.String(), Type.Null()], { description: 'the deployment running a managed store' }),
  internal_endpoint: Type.Union([Type.String(), Type.Null()]),
  attachments: Type.Array(Type.Object({ deployment: Type.String(), bucket: Type.String(), prefix: Type.String(), attached_at: Type.String() })),
  created_at: Type.String(),
});
export type StoreView = Static<typeof StoreView>;

export const storeView = (s: StoreRecord): StoreView => ({
  name: s.name,
  type: s.managed ? 'managed' : 'external',
  endpoint: s.endpoint,
  region: s.region,
  path_style: s.path_style,
  bucket: s.bucket,
  prefix: s.prefix,
  access_key_id_hint: `${s.access_key_id.slice(0, 4)}…`,
  deployment: s.managed?.deployment ?? null,
  internal_endpoint: s.managed?.internal_endpoint ?? null,
  attachments: s.attachments,
  created_at: s.created_at,
});

export class StoreRegistry {
  private constructor(private readonly doc: Document<{ stores: StoreRecord[] }>) {}

  static async open(store: PluginStore): Promise<StoreRegistry> {
    return new StoreRegistry(await store.secureDocument({ stores: [] as StoreRecord[] }, 'object-stores'));
  }

  list(): StoreRecord[] {
    return this.doc.data.stores;
  }

  find(name: string): StoreRecord | undefined {
    return this.doc.data.stores.find((s) => s.name === name);
  }

  get(name: string): StoreRecord {
    const s = this.find(name);
    if (!s) throw errors.notFound(`object store '${name}' not found`, 'OBJECT_STORE_NOT_FOUND');
    return s;
  }

  async add(record: StoreRecord): Promise<void> {
    await this.doc.update((d) => {
      if (d.stores.some((s) => s.name === record.name)) throw errors.conflict(`object store '${record.name}' already exists`, 'OBJECT_STORE_EXISTS');
      d.stores.push(record);
    });
  }

  async update(name: string, fn: (s: StoreRecord) => void): Promise<StoreRecord> {
    return this.doc.update((d) => {
      const s = d.stores.find((x) => x.name === name);
      if (!s) throw errors.notFound(`object store '${name}' not found`, 'OBJECT_STORE_NOT_FOUND');
      fn(s);
      return s;
    });
  }

  async remove(name: string): Promise<void> {
    await this.doc.update((d) => {
      d.stores = d.stores.filter((s) => s.name !== name);
    });
  }

  /** Forgets a deleted deployment's attachments (a new deployment of the same name is not attached). */
  async detach(deployment: string): Promise<string[]> {
    const names = this.doc.data.stores.filter((s) => s.attachments.some((a) => a.deployment === deployment)).map((s) => s.name);
    if (names.length) {
      await this.doc.update((d) => {
        for (const s of d.stores) s.attachments = s.attachments.filter((a) => a.deployment !== deployment);
      });
    }
    return names;
  }

  client(name: string): ObjectStoreClient {
    return new ObjectStoreClient(this.get(name));
  }
}
