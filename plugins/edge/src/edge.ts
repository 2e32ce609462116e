/**
 * The edge engine: the state document, the upstream resolution through the deployments service, the render of
 * the whole nginx configuration (the sites and what other plugins contribute) and the transactional apply: a change
 * is committed to the states (the edge's and the contributors') only when nginx accepted and reloaded the
 * configuration it produces.
 */
import { chmod, chown, rm } from 'node:fs/promises';
import { readFileSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { join } from 'node:path';
import type { Document, Logger } from '@agent/sdk';
import type { ContainerSummary } from '@agent/plugin-docker/api';
import type { DeploymentsService } from '@agent/plugin-deployments/api';
import type { ProxyContribution, ProxyContributor, ProxySnippets } from './api.js';
import { NginxApplier, SystemControl, type ApplyResult } from './nginx/apply.js';
import { OwnNginx } from './nginx/own.js';
import { GENERATION_PATH, generationOf, renderAll, siteFile, type Contribution, type ProxyLayout, type RenderInput, type Site } from './nginx/render.js';
import type { DomainEntry, EdgeState } from './state.js';
import type { CertStore } from './certs/store.js';
import type { EdgeConfig } from './config.js';
import type { ProxySettings } from './settings.js';

export interface UpstreamResolver {
  (entry: DomainEntry): Promise<string | null>;
}

/** Copies of every state a transaction may change: the edge's and each contributor's. */
interface Drafts {
  edge: EdgeState;
  contributors: Map<ProxyContributor<unknown>, unknown>;
}

/** Folders below the config folder a contributor may not take. */
const RESERVED = new Set(['sites', 'acme-webroot']);

export class Edge {
  readonly applier: NginxApplier;
  readonly layout: ProxyLayout;
  /** The agent's own nginx (proxy.mode: own), or null when the host's is driven. */
  readonly own: OwnNginx | null;
  private workerGid: number | null | undefined;
  private readonly contributors: ProxyContributor<unknown>[] = [];

  constructor(
    readonly doc: Document<EdgeState>,
    readonly config: EdgeConfig,
    readonly proxy: ProxySettings,
    readonly certs: CertStore,
    private readonly deployments: () => DeploymentsService | undefined,
    private readonly log: Logger,
  ) {
    this.layout = {
      configDir: proxy.configDir,
      webroot: proxy.webroot,
      accessLog: proxy.accessLog,
      httpPort: proxy.httpPort,
      httpsPort: proxy.httpsPort,
      listenAddress: proxy.listenAddress,
      defaultServer: proxy.defaultServer,
      // Set at start, once the own instance's nginx version is known.
      holdHttps: false,
    };
    this.own = proxy.own ? new OwnNginx(proxy, log) : null;
    this.applier = new NginxApplier(proxy.configDir, this.own ?? new SystemControl(proxy.testCommand!, proxy.reloadCommand!), log);
  }

  get state(): EdgeState {
    return this.doc.data;
  }

  /** Names of the contributors loaded now. */
  contributorNames(): string[] {
    return this.contributors.map((c) => c.name);
  }

  /** Registers a plugin's snippets; its changes go through the same queue and transaction as the edge's. */
  contribute<S>(contributor: ProxyContributor<S>): ProxyContribution<S> {
    const c = contributor as ProxyContributor<unknown>;
    if (!/^[a-z][a-z0-9-]{0,39}$/.test(c.name) || RESERVED.has(c.name)) throw new Error(`invalid proxy contributor name '${c.name}'`);
    if (this.contributors.some((x) => x.name === c.name)) throw new Error(`a proxy contributor named '${c.name}' is already registered`);
    this.contributors.push(c);
    this.contributors.sort((a, b) => (a.name < b.name ? -1 : 1));
    return {
      dir: this.file(c.name),
      mutate: (change, options) => this.transact((d) => change(d.contributors.get(c) as S), { ...options, touched: c }),
      preview: async (change) => {
        const drafts = this.drafts();
        await change(drafts.contributors.get(c) as S);
        return this.applier.diff((await this.render(drafts)).files, this.ownedDirs());
      },
    };
  }

  /**
   * `ip:port` of the container behind a domain entry, or null when it has none running. A swarm service's tasks:
   * their addresses separated by commas (the render balances over them).
   */
  async resolveUpstream(entry: DomainEntry, cache?: Map<string, Promise<ContainerSummary | null>>): Promise<string | null> {
    const deployments = this.deployments();
    if (!deployments) return entry.last_upstream;
    try {
      if (deployments.get(entry.deployment)?.runtime === 'swarm') return await this.swarmUpstream(deployments, entry);
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

  /**
   * A swarm service's tasks on this node, reached directly on the engine's gateway bridge (like a compose
   * container on its network): nginx balances over them and retries a request that found a task gone on the next
   * one, so a rolling update that stops one task at a time loses no request. Its overlay addresses are out of the
   * host's reach, and the routing mesh (the service's ingress port) is the way to tasks on other nodes only: it is
   * used when no task runs here, or when the proxy reaches host ports only (`proxy.upstream: published`). The
   * agent never publishes a port itself: an ingress port is open on every address of every node, around the
   * proxy's rules.
   */
  private async swarmUpstream(deployments: DeploymentsService, entry: DomainEntry): Promise<string | null> {
    const found = await deployments.swarmUpstream(entry.deployment, entry.service, entry.container_port);
    if (!found) return null;
    if (this.config.proxy.upstream !== 'published' && found.tasks.length) return found.tasks.join(',');
    return found.mesh ? `127.0.0.1:${found.mesh}` : null;
  }

  /** Builds the render input for the drafts; resolves every upstream (and records them in the edge's draft). */
  async model(drafts: Drafts): Promise<{ input: RenderInput; secret: Set<string> }> {
    const draft = drafts.edge;
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
    const secret = new Set<string>();
    const contributions = this.contributors.map((c) => {
      const snippets = c.snippets(drafts.contributors.get(c), this.file(c.name));
      return toContribution(c.name, snippets, secret);
    });
    return { input: { layout: this.layout, sites: [...byHost.values()], contributions }, secret };
  }

  async render(drafts: Drafts): Promise<{ files: Map<string, string>; secret: Set<string> }> {
    const { input, secret } = await this.model(drafts);
    return { files: renderAll(input), secret };
  }

  /** Copies of the current states. */
  private drafts(): Drafts {
    return {
      edge: structuredClone(this.doc.data),
      contributors: new Map(this.contributors.map((c) => [c, structuredClone(c.state())])),
    };
  }

  /** The folders whose files the agent owns: the sites, and the contributors' of now and of the last configuration. */
  private ownedDirs(): string[] {
    return [...new Set(['sites', ...this.contributorNames(), ...this.doc.data.contributors])];
  }

  /**
   * Runs `change` on copies of every state, renders and applies the result; the states are saved only when nginx
   * accepted it (the edge's, and the contributor the change was about, `touched`, or all when `change` says it
   * changed them: a deployment's removal). Errors from `change` or from nginx leave states and files as they were.
   * `skip`: `change` found nothing to do (nothing rendered, nothing saved).
   */
  private transact<T>(
    change: (drafts: Drafts) => T | Promise<T>,
    options: { force?: boolean; touched?: ProxyContributor<unknown> | 'all'; skip?: (result: T) => boolean } = {},
  ): Promise<{ result: T; applied: ApplyResult }> {
    return this.applier.exclusive(async () => {
      const drafts = this.drafts();
      const result = await change(drafts);
      if (options.skip?.(result)) return { result, applied: { changed: [], removed: [], reloaded: false } };
      const { files, secret } = await this.render(drafts);
      const applied = await this.applier.apply(files, { force: options.force, owned: this.ownedDirs(), secret, protect: (path) => this.protect(path) });
      if (applied.reloaded) await this.awaitGeneration(generationOf(files));
      // The folders of contributors no longer loaded are empty now (their files were removed with the others).
      const gone = this.doc.data.contributors.filter((n) => !this.contributorNames().includes(n));
      for (const name of gone) await rm(this.file(name), { recursive: true, force: true });
      drafts.edge.contributors = this.contributorNames();
      await this.doc.update((d) => Object.assign(d, drafts.edge));
      for (const [c, draft] of drafts.contributors) if (options.touched === 'all' || options.touched === c) await c.save(draft);
      return { result, applied };
    });
  }

  /**
   * Runs `change` on a copy of the edge's state, renders and applies the result with every contributor's current
   * snippets; the state is saved only when nginx accepted it.
   */
  mutate<T>(change: (draft: EdgeState) => T | Promise<T>, options: { force?: boolean } = {}): Promise<{ result: T; applied: ApplyResult }> {
    return this.transact((d) => change(d.edge), options);
  }

  /**
   * Removes a deleted deployment from the edge's state (`change`) and from every contributor's (`forget`), in one
   * transaction: one reload. Nothing is rendered when none of them held anything of it.
   */
  removeDeployment(name: string, change: (draft: EdgeState) => boolean): Promise<{ result: boolean; applied: ApplyResult }> {
    return this.transact(
      async (d) => {
        let changed = change(d.edge);
        for (const [c, draft] of d.contributors) if (c.forget?.(draft, name)) changed = true;
        return changed;
      },
      { touched: 'all', skip: (changed) => !changed },
    );
  }

  /** What `change` would do to the generated files (unified diff), without doing it. */
  async preview(change: (draft: EdgeState) => unknown): Promise<{ diff: string; changed: string[]; removed: string[] }> {
    const drafts = this.drafts();
    await change(drafts.edge);
    return this.applier.diff((await this.render(drafts)).files, this.ownedDirs());
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

  /**
   * Secret files (password hashes) are read by nginx workers: for the host's nginx owned by root and the workers'
   * group, 0640; the own instance's workers run as the agent's user, so only it reads them (0600).
   */
  private async protect(path: string): Promise<void> {
    if (this.own) return chmod(path, 0o600);
    if (this.workerGid === undefined) this.workerGid = groupId(this.config.proxy.worker_group);
    // Without the group, the file has to be world-readable for the workers (it holds hashes only).
    if (this.workerGid === null) return chmod(path, 0o644);
    await chown(path, process.getuid?.() ?? 0, this.workerGid).catch(() => chmod(path, 0o644));
  }
}

/** A contributor's snippets as the render uses them: its files named relative to the config folder. */
function toContribution(name: string, s: ProxySnippets, secret: Set<string>): Contribution {
  const files = new Map<string, string>();
  for (const [path, file] of Object.entries(s.files ?? {})) {
    // Its own folder only: a path that climbs out of it would overwrite another's files.
    if (!/^[A-Za-z0-9._-]+(\/[A-Za-z0-9._-]+)*$/.test(path) || path.split('/').some((p) => p === '..' || p === '.') || path === 'http.conf') {
      throw new Error(`proxy contributor '${name}': invalid file name '${path}'`);
    }
    files.set(`${name}/${path}`, file.content);
    if (file.secret) secret.add(`${name}/${path}`);
  }
  return {
    name,
    http: s.http ?? null,
    files,
    server: (deployment) => s.server?.(deployment) ?? [],
    locations: (deployment) => s.locations?.(deployment) ?? [],
  };
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
