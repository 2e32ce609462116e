/**
 * System logs: the proxy's access and error logs and the shared infrastructure containers (labelled
 * `traffic.infrastructure_label`), read with `tail`/`filter`/`deployment` or followed over a websocket.
 */
import { existsSync, statSync } from 'node:fs';
import { deploymentName, errors, Nullable, Type, type Principal } from '@agent/sdk';
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

const SourceSchema = Type.Object({
  id: Type.String(),
  name: Type.String(),
  type: Type.String(),
  path: Nullable(Type.String()),
  container: Nullable(Type.String()),
  available: Type.Boolean(),
  size: Nullable(Type.Integer()),
});
const LineSchema = Type.Object({ line: Type.String(), time: Nullable(Type.String()), stream: Nullable(Type.String()) });
const Query = Type.Object({
  source: Type.String({ pattern: '^[a-z0-9][a-z0-9:_.-]{0,200}$', default: 'proxy-access', description: 'source id (see /system/logs/sources)' }),
  tail: Type.Optional(Type.Integer({ minimum: 0, maximum: 100_000, default: 100, description: 'last lines; 0 = all' })),
  filter: Type.Optional(Type.String({ maxLength: 200, description: 'keep lines containing this text' })),
  deployment: Type.Optional(
    deploymentName({ description: 'only the access-log lines of this deployment (source proxy-access); bound to it. Without: global' }),
  ),
});
const ACCESS = 'proxy-access';

export function systemLogRoutes(rt: Runtime): void {
  const { ctx, edge } = rt;

  const fileSource = (id: string, name: string, path: string): Source => {
    const st = existsSync(path) ? statSync(path) : null;
    return { id, name, type: 'file', path, container: null, available: !!st, size: st?.size ?? null };
  };

  const sources = async (): Promise<Source[]> => {
    const out = [
      fileSource('proxy-access', 'proxy access log (JSON)', edge.layout.accessLog),
      fileSource('proxy-error', 'proxy error log', ctx.config.proxy.error_log),
    ];
    const docker = rt.docker();
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
  };

  const resolve = async (id: string): Promise<Source> => {
    const s = (await sources()).find((x) => x.id === id);
    if (!s) throw errors.notFound(`log source '${id}' not found`);
    return s;
  };

  /**
   * Line predicate for the query. With `deployment`: the access-log lines nginx tagged with it, from when the
   * deployment of that name was created (lines of an earlier, deleted deployment of the same name stay out). The
   * lines of a name no deployment has now are a deleted deployment's: global principals only.
   */
  const predicate = (q: { filter?: string; deployment?: string }, principal: Principal) => {
    const current = q.deployment ? rt.deployments().get(q.deployment) : undefined;
    const created = Date.parse(current?.created_at ?? '');
    const since = Number.isFinite(created) ? created : current || principal.isGlobal ? -Infinity : Infinity;
    return (line: string) => {
      if (q.filter && !line.includes(q.filter)) return false;
      if (!q.deployment) return true;
      const r = parseLine(line);
      return !!r && r.deployment === q.deployment && r.time_ms >= since;
    };
  };

  /** A request for one deployment reads only the access log: the other sources are global, not even resolved. */
  const source = async (q: { source: string; deployment?: string }): Promise<Source> => {
    if (q.deployment && q.source !== ACCESS) {
      throw errors.badRequest(`source: with deployment, only '${ACCESS}' (the other sources are global)`, 'VALIDATION_FAILED', { field: 'source' });
    }
    return resolve(q.source);
  };

  const containerLines = async (s: Source, tail: number, follow: boolean, signal?: AbortSignal) =>
    rt.docker()!.containerLogs(s.container!, { tail, follow, timestamps: true, signal });

  ctx.route({
    method: 'GET',
    path: '/system/logs/sources',
    permission: 'system-logs:read',
    operationId: 'system.logSources',
    tag: 'system',
    summary: 'Host log sources: proxy access and error logs, shared infrastructure containers',
    response: Type.Array(SourceSchema),
    handler: () => sources(),
  });

  ctx.route({
    method: 'GET',
    path: '/system/logs',
    permission: 'system-logs:read',
    operationId: 'system.logs',
    tag: 'system',
    summary: 'Read a host log source (last lines, text filter, one deployment)',
    query: Query,
    description: 'With `deployment`, bound to it (its access-log lines only); without, global.',
    deployment: (req) => req.query.deployment,
    response: Type.Array(LineSchema),
    handler: async (req) => {
      const s = await source(req.query);
      const tail = req.query.tail ?? 100;
      const keep = predicate(req.query, req.principal);
      if (s.type === 'file') {
        if (!s.available) return [];
        return (await tailLines(s.path!, tail, keep)).lines.map((line) => ({ line, time: null, stream: null }));
      }
      const out = [];
      for await (const l of await containerLines(s, tail, false)) if (keep(l.text)) out.push({ line: l.text, time: l.time, stream: l.stream });
      return out;
    },
  });

  ctx.websocket({
    path: '/system/logs/stream',
    permission: 'system-logs:read',
    operationId: 'system.logsStream',
    tag: 'system',
    summary: 'Follow a host log source (same query as /system/logs); messages are {line, time, stream}',
    query: Query,
    description: 'With `deployment`, bound to it (its access-log lines only); without, global.',
    deployment: (req) => req.query.deployment,
    handler: async (conn, req) => {
      const s = await source(req.query);
      const keep = predicate(req.query, req.principal);
      const tail = req.query.tail ?? 100;
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
      for await (const l of await containerLines(s, tail, true, conn.signal))
        if (keep(l.text)) await conn.send({ line: l.text, time: l.time, stream: l.stream });
      conn.close(1000, 'source ended');
    },
  });
}
