/**
 * The edge engine: the state document, the upstream resolution through the deployments service, the render of
 * the whole nginx configuration and the transactional apply (a change is committed to the state only when nginx
 * accepted and reloaded the configuration it produces).
 */
import { chmod, chown } from 'node:fs/promises';
import { readFileSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { join } from 'node:path';
import type { Document, Logger } from '@agent/sdk';
import type { ContainerSummary } from '@agent/plugin-docker/api';
import type { DeploymentsService } from '@agent/plugin-deployments/api';
import { NginxApplier, type ApplyResult } from './nginx/apply.js';
import {
  GENERATION_PATH,
  generationOf,
  renderAll,
  siteFile,
  tag,
  type Overlay,
  type ProxyLayout,
  type RenderInput,
  type SecurityModel,
  type Site,
} from './nginx/render.js';
import { isExpired, type DomainEntry, type EdgeState } from './state.js';
import type { CertStore } from './certs/store.js';
import type { EdgeConfig } from './config.js';

export interface UpstreamResolver {
  (entry: DomainEntry): Promise<string | null>;
}

export class Edge {
  readonly applier: NginxApplier;
  readonly layout: ProxyLayout;
  private workerGid: number | null | undefined;

  constructor(
    readonly doc: Document<EdgeState>,
    readonly config: EdgeConfig,
    readonly certs: CertStore,
    private readonly deployments: () => DeploymentsService | undefined,
    private readonly log: Logger,
  ) {
    const p = config.proxy;
    this.layout = {
      configDir: p.config_dir,
      webroot: p.webroot || join(p.config_dir, 'acme-webroot'),
      accessLog: p.access_log,
      httpPort: p.http_port,
      httpsPort: p.https_port,
      listenAddress: p.listen_address,
      defaultServer: p.default_server,
    };
    this.applier = new NginxApplier(p.config_dir, p.test_command, p.reload_command, log);
  }

  get state(): EdgeState {
    return this.doc.data;
  }

  /** `ip:port` of the container behind a domain entry, or null when it has none running. */
  async resolveUpstream(entry: DomainEntry, cache?: Map<string, Promise<ContainerSummary | null>>): Promise<string | null> {
    const deployments = this.deployments();
    if (!deployments) return entry.last_upstream;
    try {
      // One engine query per service and render, however many domains route to it.
      const key = `${entry.deployment}/${entry.service}`;
      let lookup = cache?.get(key);
      if (!lookup) {
        lookup = deployments.serviceContainer(entry.deployment, entry.service);
        cache?.set(key, lookup);
      }
      const c = await lookup;
      if (!c || c.state !== 'running') return null;
      if (this.config.proxy.upstream === 'published') {
        const port = c.ports.find((p) => p.private === entry.container_port && p.public);
        if (!port) return null;
        const ip = !port.ip || port.ip === '0.0.0.0' ? '127.0.0.1' : port.ip === '::' ? '[::1]' : port.ip.includes(':') ? `[${port.ip}]` : port.ip;
        return `${ip}:${port.public}`;
      }
      const ip = Object.values(c.networks).find((a) => !!a);
      return ip ? `${ip}:${entry.container_port}` : null;
    } catch (err) {
      // Engine unavailable or deployment gone: keep serving the last known address rather than breaking the site.
      this.log.warn('upstream not resolved; keeping the last known address', { domain: entry.domain, error: (err as Error).message });
      return entry.last_upstream;
    }
  }

  /** Builds the render input for a state; resolves every upstream (and records them in `draft`). */
  async model(draft: EdgeState): Promise<RenderInput> {
    const now = Date.now();
    const byHost = new Map<string, Site>();
    const containers = new Map<string, Promise<ContainerSummary | null>>();
    for (const d of draft.domains) {
      const upstream = await this.resolveUpstream(d, containers);
      if (upstream) d.last_upstream = upstream;
      let site = byHost.get(d.domain);
      if (!site) {
        site = { host: d.domain, deployment: d.deployment, names: [d.domain], routes: [], tls: null };
        byHost.set(d.domain, site);
      }
      for (const a of d.aliases) if (!site.names.includes(a)) site.names.push(a);
      site.routes.push({ domainId: String(d.id), prefix: d.path_prefix, strip: d.strip_prefix, upstream });
    }
    for (const site of byHost.values()) {
      const wantsTls = draft.domains.some((d) => d.domain === site.host && d.ssl.enabled);
      if (wantsTls && this.certs.has(site.host)) {
        const p = this.certs.paths(site.host);
        site.tls = { cert: p.cert, key: p.key };
      }
    }
    return { layout: this.layout, sites: [...byHost.values()], security: this.securityModel(draft, now) };
  }

  securityModel(draft: EdgeState, now = Date.now()): SecurityModel {
    const active = draft.blocked.filter((b) => !isExpired(b, now));
    const deploymentBlocks: Record<string, string[]> = {};
    const overlays: Record<string, Overlay[]> = {};
    const rateZones: SecurityModel['rateZones'] = [];
    const htpasswd: Record<string, string> = {};
    for (const b of active) if (b.deployment) (deploymentBlocks[b.deployment] ??= []).push(b.ip);
    for (const [dep, s] of Object.entries(draft.deployment_security)) {
      if (!s.enabled) continue;
      if (s.blocked_ips.length) (deploymentBlocks[dep] ??= []).push(...s.blocked_ips);
      for (const p of s.protected_paths) if (p.enabled) (overlays[dep] ??= []).push({ path: p.pattern, deny: true });
      s.rate_limits.forEach((r, i) => {
        if (!r.enabled) return;
        const zone = `agent_rl_${tag(dep)}_${i}`;
        rateZones.push({ zone, rate: r.rate });
        (overlays[dep] ??= []).push({ path: r.path, rate: { zone, burst: r.burst } });
      });
    }
    for (const r of draft.protected) {
      if (!r.enabled) continue;
      const file = `security/htpasswd/route-${r.id}`;
      htpasswd[file] = `${r.username}:${r.password_hash}\n`;
      const methods = r.method === 'ALL' ? 'ALL' : r.method === 'GET' ? ['GET', 'HEAD'] : [r.method];
      (overlays[r.deployment] ??= []).push({ path: r.path, auth: { id: String(r.id), methods, file: join(this.layout.configDir, file) } });
    }
    return {
      blocked: active.filter((b) => !b.deployment).map((b) => b.ip),
      allowNets: draft.whitelist.filter((w) => w.type !== 'path').map((w) => w.value),
      allowPaths: draft.whitelist.filter((w) => w.type === 'path').map((w) => w.value),
      deploymentBlocks,
      overlays,
      rateZones,
      htpasswd,
    };
  }

  async render(draft: EdgeState): Promise<Map<string, string>> {
    return renderAll(await this.model(draft));
  }

  /**
   * Runs `change` on a copy of the state, renders and applies the result; the state is saved only when nginx
   * accepted it. Errors from `change` or from nginx leave state and files as they were.
   */
  mutate<T>(change: (draft: EdgeState) => T | Promise<T>, options: { force?: boolean } = {}): Promise<{ result: T; applied: ApplyResult }> {
    return this.applier.exclusive(async () => {
      const draft = structuredClone(this.doc.data);
      const result = await change(draft);
      const files = await this.render(draft);
      const applied = await this.applier.apply(files, options);
      await this.fixPermissions(applied.changed);
      if (applied.reloaded) await this.awaitGeneration(generationOf(files));
      await this.doc.update((d) => Object.assign(d, draft));
      return { result, applied };
    });
  }

  /** What `change` would do to the generated files (unified diff), without doing it. */
  async preview(change: (draft: EdgeState) => unknown): Promise<{ diff: string; changed: string[]; removed: string[] }> {
    const draft = structuredClone(this.doc.data);
    await change(draft);
    return this.applier.diff(await this.render(draft));
  }

  /** Absolute paths of generated files (plan snapshots). */
  file(rel: string): string {
    return join(this.layout.configDir, rel);
  }

  siteFile(host: string): string {
    return this.file(siteFile(host));
  }

  /**
   * `nginx -s reload` only signals the master: wait (bounded) until the new workers answer with the new
   * generation, so a change is in force when the API answers.
   */
  private async awaitGeneration(generation: string): Promise<void> {
    if (!this.layout.defaultServer) return;
    const address =
      !this.layout.listenAddress || this.layout.listenAddress === '0.0.0.0'
        ? '127.0.0.1'
        : this.layout.listenAddress === '::'
          ? '::1'
          : this.layout.listenAddress;
    const until = Date.now() + 3000;
    // Old workers keep accepting for a moment after the new ones start: ask on fresh connections until several
    // answers in a row come from the new configuration.
    let streak = 0;
    while (Date.now() < until) {
      const answer = await probe(address, this.layout.httpPort, GENERATION_PATH).catch(() => null);
      streak = answer === generation ? streak + 1 : 0;
      if (streak >= 5) return;
      await new Promise((r) => setTimeout(r, streak ? 5 : 15));
    }
    this.log.warn('nginx did not report the new configuration within 3 s');
  }

  /** htpasswd files are read by nginx workers: owned by root and the workers' group, 0640. */
  private async fixPermissions(changed: string[]): Promise<void> {
    const files = changed.filter((f) => f.startsWith('security/htpasswd/'));
    if (files.length === 0) return;
    if (this.workerGid === undefined) this.workerGid = groupId(this.config.proxy.worker_group);
    for (const f of files) {
      // Without the group, the file has to be world-readable for the workers (it holds hashes only).
      if (this.workerGid === null) await chmod(this.file(f), 0o644);
      else await chown(this.file(f), process.getuid?.() ?? 0, this.workerGid).catch(() => chmod(this.file(f), 0o644));
    }
  }
}

function groupId(name: string): number | null {
  try {
    const line = readFileSync('/etc/group', 'utf8')
      .split('\n')
      .find((l) => l.split(':')[0] === name);
    return line ? Number(line.split(':')[2]) : null;
  } catch {
    return null;
  }
}

function probe(host: string, port: number, path: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host, port, path, agent: false, headers: { host: 'agent-generation.invalid' }, timeout: 500 }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c) => (body += c));
      res.on('end', () => resolve(body));
    });
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', reject);
    req.end();
  });
}
