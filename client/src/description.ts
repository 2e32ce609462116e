/**
 * The live description (`/api/openapi.json`) as a list of operations: `<group> <name>` commands derived from the
 * operationIds (`deployments.list` → `deployments list`, `plans.apply` → `plans apply`), with their parameters and
 * body schema resolved. Nothing here is specific to one agent version: whatever the agent publishes is offered.
 */
import { derefSchema, resolveRef, type JsonSchema } from './json-schema.js';

/**
 * Orders by UTF-16 code units, the same order on every host (and no ICU collation data loaded). The plugin SDK has
 * the same comparator; the client keeps its own line rather than depend on the plugin API for it.
 */
const compareText = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);

export interface OperationParameter {
  name: string;
  in: 'path' | 'query';
  required: boolean;
  description?: string;
  schema: JsonSchema;
}

export interface Operation {
  /** `deployments.list` */
  id: string;
  /** Command group (the operationId prefix): `deployments` */
  group: string;
  /** Kebab-case command: `list`, `logs-stream`, `security-events-get` */
  name: string;
  method: string;
  /** OpenAPI path with `{param}` placeholders, e.g. `/api/deployments/{name}` */
  path: string;
  summary: string;
  description?: string;
  /** `x-permission`: `deployments:write`, `authenticated` or `public` */
  permission: string;
  /** `x-plugin`: the plugin that serves it (`core` for the kernel's own routes), when the description says. */
  plugin?: string;
  /** `x-plan`: accepts `?plan=true` */
  plan: boolean;
  websocket: boolean;
  deploymentScoped: boolean;
  pathParams: OperationParameter[];
  /** Query parameters without the `plan` flag (offered as `--plan`). */
  queryParams: OperationParameter[];
  /** JSON body schema, dereferenced. */
  body?: JsonSchema;
  /** Content type of a non-JSON request body (uploads). */
  rawBodyType?: string;
  /** Success status and its content type (`application/json` for the envelope). */
  successStatus: number;
  produces?: string;
  /** Schema of `data` in the success answer, when documented. */
  responseData?: JsonSchema;
}

export interface GroupInfo {
  name: string;
  description?: string;
  operations: Operation[];
}

const METHODS = ['get', 'post', 'put', 'patch', 'delete'];

/** `metricsLatest` → `metrics-latest`, `securityEventsGet` → `security-events-get`, `logs.stream` → `logs-stream` */
export function kebab(name: string): string {
  return name
    .replace(/([a-z0-9])([A-Z])/g, '$1-$2')
    .replace(/([A-Z])([A-Z][a-z])/g, '$1-$2')
    .replace(/[._\s]+/g, '-')
    .toLowerCase();
}

const capitalise = (s: string) => s.charAt(0).toUpperCase() + s.slice(1);
/** `Check the token` → `check the token`; an acronym or a code (`API keys`, `JSON`) keeps its case. */
const lowerFirst = (s: string) => (/^[A-Z][a-z]/.test(s) ? s.charAt(0).toLowerCase() + s.slice(1) : s);

/** Loose comparison of a typed command with a known name: case and dashes do not matter. */
const loose = (s: string) => s.toLowerCase().replace(/[-_.]/g, '');

type Json = Record<string, any>;

function parseOperation(doc: Json, path: string, method: string, op: Json): Operation | null {
  if (typeof op.operationId !== 'string') return null;
  const dot = op.operationId.indexOf('.');
  const group = kebab(dot > 0 ? op.operationId.slice(0, dot) : (op.tags?.[0] ?? 'api'));
  const name = kebab(dot > 0 ? op.operationId.slice(dot + 1) : op.operationId);
  const successKey = Object.keys(op.responses ?? {})
    .filter((k) => /^2\d\d$/.test(k))
    .sort()[0];
  const success = successKey ? (op.responses as Json)[successKey] : undefined;
  const successTypes = Object.keys(success?.content ?? {});
  const jsonType = successTypes.find((t) => /json/.test(t));
  const bodyContent = (op.requestBody?.content ?? {}) as Json;
  const bodyJsonType = Object.keys(bodyContent).find((t) => /json/.test(t));
  // A JSON answer without the `{data}` envelope (the description document itself, described by its own schema or as a
  // string) is a document; a create's 201 is the resource's envelope or a plan's (`oneOf`), an envelope either way.
  const jsonSchema = jsonType ? ((success.content[jsonType].schema ?? {}) as Json) : undefined;
  const isEnvelope = (schema: Json): boolean => {
    const s = resolveRef(schema, doc);
    return !!(s.properties as Json | undefined)?.data || ((s.oneOf ?? s.anyOf) as Json[] | undefined)?.some(isEnvelope) === true;
  };
  const jsonIsDocument = !!jsonSchema && !isEnvelope(jsonSchema);
  const operation = {
    id: op.operationId,
    group,
    name,
    method: method.toUpperCase(),
    path,
    summary: typeof op.summary === 'string' ? op.summary : '',
    description: typeof op.description === 'string' ? op.description : undefined,
    permission: typeof op['x-permission'] === 'string' ? op['x-permission'] : 'unknown',
    plugin: typeof op['x-plugin'] === 'string' ? op['x-plugin'] : undefined,
    plan: op['x-plan'] === true,
    websocket: op['x-websocket'] === true,
    deploymentScoped: op['x-deployment-scoped'] === true,
    rawBodyType: bodyJsonType ? undefined : Object.keys(bodyContent)[0],
    successStatus: successKey ? Number(successKey) : 200,
    // Several types (an export as CSV, or as JSON on request): the first is what the operation answers by default.
    produces: jsonType && successTypes[0] === jsonType ? (jsonIsDocument ? jsonType : undefined) : successTypes[0],
  } as Operation;
  // Schemas are resolved on first use: a CLI call needs one operation's, not the other few hundred.
  const params = once(() => ((op.parameters ?? []) as Json[]).map((p) => derefSchema(p, doc) as Json));
  const toParam = (p: Json): OperationParameter => ({
    name: String(p.name),
    in: p.in,
    required: p.in === 'path' ? true : !!p.required,
    description: typeof p.description === 'string' ? p.description : undefined,
    schema: (p.schema ?? {}) as JsonSchema,
  });
  defineLazy(operation, 'pathParams', () =>
    params()
      .filter((p) => p.in === 'path')
      .map(toParam),
  );
  defineLazy(operation, 'queryParams', () =>
    params()
      .filter((p) => p.in === 'query' && !(p.name === 'plan' && op['x-plan'] === true))
      .map(toParam),
  );
  defineLazy(operation, 'body', () => (bodyJsonType ? derefSchema(bodyContent[bodyJsonType].schema ?? {}, doc) : undefined));
  defineLazy(operation, 'responseData', () =>
    jsonSchema && !jsonIsDocument ? (derefSchema(jsonSchema, doc).properties?.data as JsonSchema | undefined) : undefined,
  );
  return operation;
}

function once<T>(fn: () => T): () => T {
  let done = false;
  let value: T;
  return () => {
    if (!done) {
      value = fn();
      done = true;
    }
    return value;
  };
}

function defineLazy<K extends keyof Operation>(target: Operation, key: K, compute: () => Operation[K]): void {
  const get = once(compute);
  Object.defineProperty(target, key, { get, enumerable: true, configurable: true });
}

export class ApiDescription {
  readonly version: string;
  readonly title: string;
  readonly operations: Operation[];
  private readonly tagDescriptions = new Map<string, string>();
  private readonly resourceDescriptions = new Map<string, string>();
  private groupList?: GroupInfo[];

  constructor(readonly document: Json) {
    if (!document || typeof document !== 'object' || typeof document.paths !== 'object') throw new Error('not an OpenAPI document (no paths)');
    this.version = String(document.info?.version ?? 'unknown');
    this.title = String(document.info?.title ?? 'agent API');
    const ops: Operation[] = [];
    for (const [path, item] of Object.entries(document.paths as Json)) {
      for (const method of METHODS) {
        const raw = (item as Json)[method];
        if (!raw) continue;
        const op = parseOperation(document, path, method, raw);
        if (op) ops.push(op);
      }
    }
    this.operations = ops.sort((a, b) => compareText(a.group, b.group) || compareText(a.name, b.name));
    for (const t of (document.tags ?? []) as Json[]) if (t.description) this.tagDescriptions.set(kebab(String(t.name)), String(t.description));
    const permissions = Array.isArray(document['x-permissions']) ? (document['x-permissions'] as Json[]) : [];
    for (const r of permissions)
      if (typeof r.resource === 'string' && typeof r.description === 'string') this.resourceDescriptions.set(r.resource, r.description);
  }

  groups(): GroupInfo[] {
    if (this.groupList) return this.groupList;
    const byGroup = new Map<string, Operation[]>();
    for (const op of this.operations) byGroup.set(op.group, [...(byGroup.get(op.group) ?? []), op]);
    this.groupList = [...byGroup].map(([name, operations]) => ({ name, description: this.describeGroup(name, operations), operations }));
    return this.groupList;
  }

  /**
   * What a group is about. Only plugins' own tags carry a description in the agent's document; a group named after
   * a route tag (`images`, `users`) gets the description of the permission resource its operations check (the
   * catalogue `x-permissions` describes every resource), and a group without one (`auth`: public and
   * logged-in routes) the summaries of its operations.
   */
  private describeGroup(name: string, operations: Operation[]): string | undefined {
    const tagged = this.tagDescriptions.get(name);
    if (tagged) return tagged;
    const counts = new Map<string, number>();
    for (const op of operations) {
      const resource = /^([^:]+):(read|write)$/.exec(op.permission)?.[1];
      if (resource && this.resourceDescriptions.has(resource)) counts.set(resource, (counts.get(resource) ?? 0) + 1);
    }
    const resource = counts.has(name) ? name : [...counts].sort((a, b) => b[1] - a[1] || compareText(a[0], b[0]))[0]?.[0];
    if (resource) return capitalise(this.resourceDescriptions.get(resource)!);
    const summaries = operations.map((o) => o.summary.replace(/\s*\(.*?\)\s*/g, ' ').trim()).filter(Boolean);
    if (summaries.length === 0) return undefined;
    // Two say what the group is about; all of them are in `agentctl <group> --help`.
    return [capitalise(summaries[0]!), ...summaries.slice(1, 2).map(lowerFirst), ...(summaries.length > 2 ? ['…'] : [])].join('; ');
  }

  group(name: string): GroupInfo | undefined {
    return this.groups().find((g) => loose(g.name) === loose(name));
  }

  /** The operation for `<group> <name>` (kebab or camel case). */
  find(group: string, name: string): Operation | undefined {
    return this.operations.find((o) => loose(o.group) === loose(group) && loose(o.name) === loose(name));
  }

  byId(operationId: string): Operation | undefined {
    return this.operations.find((o) => o.id === operationId);
  }

  /**
   * Operations that read one background job: a GET of one path argument whose answer has a `status` and a
   * `progress` (an image pull, a backup, a restore). An answer carrying a `job_id` is followed through them: those
   * of the same group first, then those of the same plugin, then the others.
   */
  jobReadersFor(op: Operation): Operation[] {
    const readers = this.operations.filter(isJobReader);
    const rank = (o: Operation) => (o.group === op.group ? 0 : o.plugin && o.plugin === op.plugin ? 1 : 2);
    return readers.sort((a, b) => rank(a) - rank(b));
  }

  /** The websocket that follows a GET (`/logs` → `/logs/stream`), offered as `--follow`. */
  followStreamOf(op: Operation): Operation | undefined {
    if (op.method !== 'GET' || op.websocket) return undefined;
    return this.operations.find((o) => o.websocket && o.path === `${op.path}/stream`);
  }
}

/** The property names of an object schema, those of its `allOf` parts included (an intersection of two objects). */
function propertyNames(schema: JsonSchema | undefined, depth = 0): Set<string> {
  const names = new Set<string>(Object.keys(schema?.properties ?? {}));
  if (depth < 4) for (const part of schema?.allOf ?? []) for (const n of propertyNames(part, depth + 1)) names.add(n);
  return names;
}

/** Whether an operation reads one background job: a GET of one path argument answering `status` and `progress`. */
export function isJobReader(op: Operation): boolean {
  if (op.method !== 'GET' || op.websocket || op.pathParams.length !== 1) return false;
  const names = propertyNames(op.responseData);
  return names.has('status') && names.has('progress');
}

/** Whether an operation's answer announces a background job (`job_id` in its data). */
export const startsJob = (op: Operation): boolean => propertyNames(op.responseData).has('job_id');

/** The concrete path of an operation: `{name}` placeholders replaced by encoded values. */
export function fillPath(op: Operation, values: Record<string, unknown>): string {
  return op.path.replace(/\{([^}]+)\}/g, (_m, name: string) => {
    const v = values[name];
    if (v === undefined || v === null || v === '') throw new Error(`missing path argument <${name}>`);
    return encodeURIComponent(String(v));
  });
}
