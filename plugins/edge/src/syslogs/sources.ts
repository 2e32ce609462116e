/**
 * System logs: the proxy's access and error logs and the shared infrastructure containers (labelled
 * `traffic.infrastructure_label`), read with `tail`/`filter`/`deployment` or followed.
 */
import { existsSync, statSync } from 'node:fs';
import { deploymentName, errors, Nullable, Type, type Principal, type Static, type WebSocketConnection } from '@agent/sdk';
import type { Runtime } from '../runtime.js';
import { parseLine } from '../traffic/parse.js';
import { followFile, tailLines } from './files.js';

interface Source {
  id: string;
  name: string;
  type: 'file' | 'container';
  path: string | null;
  container: string | null;
  available: boolean;
  size: number | null;
}

export const SourceSchema = Type.Object({
  id: Type.String(),
  name: Type.String(),
  type: Type.String(),
  path: Nullable(Type.String()),
  container: Nullable(Type.String()),
  available: Type.Boolean(),
  size: Nullable(Type.Integer()),
});
export const LineSchema = Type.Object({ line: Type.String(), time: Nullable(Type.String()), stream: Nullable(Type.String()) });
export const LogsQuery = Type.Object({
  source: Type.String({ pattern: '^[a-z0-9][a-z0-9:_.-]{0,200}$', default: 'proxy-access', description: 'source id (see /system/logs/sources)' }),
  tail: Type.Optional(Type.Integer({ minimum: 0, maximum: 100_000, default: 100, description: 'last lines; 0 = all' })),
  filter: Type.Optional(Type.String({ maxLength: 200, description: 'keep lines containing this text' })),
  deployment: Type.Optional(
    deploymentName({ description: 'only the access-log lines of this deployment (source proxy-access); bound to it. Without: global' }),
  ),
});
type Query = Static<typeof LogsQuery>;
type Line = Static<typeof LineSchema>;
const ACCESS = 'proxy-access';

export class SystemLogs {
  constructor(private readonly rt: Runtime) {}

  private fileSource(id: string, name: string, path: string): Source {
    const st = existsSync(path) ? statSync(path) : null;
    return { id, name, type: 'file', path, container: null, available: !!st, size: st?.size ?? null };
  }

  async sources(): Promise<Source[]> {
    const { ctx, edge } = this.rt;
    const out = [
      this.fileSource('proxy-access', 'proxy access log (JSON)', edge.layout.accessLog),
      this.fileSource('proxy-error', 'proxy error log', edge.proxy.errorLog),
    ];
    const docker = this.rt.docker();
    if (docker?.available()) {
      const label = ctx.config.traffic.infrastructure_label;
      for (const c of await docker.listContainers({ all: true, labels: { [label]: '' } })) {
        out.push({
          id: `container:${c.name}`,
          name: `${c.labels[label] || c.name} (infrastructure container)`,
          type: 'container',
          path: null,
          container: c.name,
          available: c.state === 'running',
          size: null,
        });
      }
    }
    return out;
  }

  /** A request for one deployment reads only the access log: the other sources are global, not even resolved. */
  private async source(q: Query): Promise<Source> {
    if (q.deployment && q.source !== ACCESS) {
      throw errors.badRequest(`source: with deployment, only '${ACCESS}' (the other sources are global)`, 'VALIDATION_FAILED', { field: 'source' });
    }
    const s = (await this.sources()).find((x) => x.id === q.source);
    if (!s) throw errors.notFound(`log source '${q.source}' not found`);
    return s;
  }

  /**
   * Line predicate for the query. With `deployment`: the access-log lines nginx tagged with it, from when the
   * deployment of that name was created (lines of an earlier, deleted deployment of the same name stay out). The
   * lines of a name no deployment has now are a deleted deployment's: global principals only.
   */
  private predicate(q: Query, principal: Principal) {
    const current = q.deployment ? this.rt.deployments().get(q.deployment) : undefined;
    const created = Date.parse(current?.created_at ?? '');
    const since = Number.isFinite(created) ? created : current || principal.isGlobal ? -Infinity : Infinity;
    return (line: string) => {
      if (q.filter && !line.includes(q.filter)) return false;
      if (!q.deployment) return true;
      const r = parseLine(line);
      return !!r && r.deployment === q.deployment && r.time_ms >= since;
    };
  }

  private containerLines(s: Source, tail: number, follow: boolean, signal?: AbortSignal) {
    return this.rt.docker()!.containerLogs(s.container!, { tail, follow, timestamps: true, signal });
  }

  /** The last lines of a source that pass the query. */
  async read(q: Query, principal: Principal): Promise<Line[]> {
    const s = await this.source(q);
    const tail = q.tail ?? 100;
    const keep = this.predicate(q, principal);
    if (s.type === 'file') {
      if (!s.available) return [];
      return (await tailLines(s.path!, tail, keep)).lines.map((line) => ({ line, time: null, stream: null }));
    }
    const out = [];
    for await (const l of this.containerLines(s, tail, false)) if (keep(l.text)) out.push({ line: l.text, time: l.time, stream: l.stream });
    return out;
  }

  /** The last lines, then the lines as they come, until the connection ends. */
  async follow(conn: WebSocketConnection, q: Query, principal: Principal): Promise<void> {
    const s = await this.source(q);
    const keep = this.predicate(q, principal);
    const tail = q.tail ?? 100;
    if (s.type === 'file') {
      const { lines, end } = s.available ? await tailLines(s.path!, tail, keep) : { lines: [], end: 0 };
      for (const line of lines) await conn.send({ line, time: null, stream: null });
      await followFile(
        s.path!,
        end,
        async (appended) => {
          for (const line of appended) if (keep(line)) await conn.send({ line, time: null, stream: null });
        },
        conn.signal,
      );
      return;
    }
    for await (const l of this.containerLines(s, tail, true, conn.signal)) if (keep(l.text)) await conn.send({ line: l.text, time: l.time, stream: l.stream });
    conn.close(1000, 'source ended');
  }
}
