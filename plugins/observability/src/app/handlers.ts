/**
 * The app's route handlers, keyed by operationId. Everything is filtered by the caller's scope and deployment
 * grants (the core already refused the global routes to principals limited to their deployments).
 */
import { randomUUID } from 'node:crypto';
import { canReach, compareText } from '@agent/sdk';
import { HOST_METRIC_NAMES, type ConfigPatch, type RuleInput } from '../app-routes.js';
import { canUseRuleScope } from './access.js';
import { normalizeRule, sameContent, type AlertEngine, type Rule } from './alerts.js';
import type { Collector, ContainerReading } from './collector.js';
import type { HealthWatcher } from './health-watcher.js';
import type { Journal } from './journal.js';
import { exposition } from './prometheus.js';
import { AppError, badRequest, type Handler, type Request } from './server.js';
import type { QueryResult, SeriesStore } from './series-store.js';
import type { Settings } from './settings.js';

interface Deps {
  collector: Collector;
  store: SeriesStore;
  alerts: AlertEngine;
  journal: Journal;
  watcher: HealthWatcher;
  settings: Settings;
  /** Applies the deployment deletions the agent recorded (their rules go) before rules are read or written. */
  deletions: { sync(): Promise<void> };
}

const UNITS: Record<string, number> = { s: 1, m: 60, h: 3600, d: 86400 };

/** `15m` → seconds since the epoch, 15 minutes ago; an RFC 3339 time as is. */
export function parseSince(text: string | null, now = Date.now()): number {
  const value = text ?? '1h';
  const m = /^(\d{1,6})(s|m|h|d)$/.exec(value);
  if (m) return now / 1000 - Number(m[1]) * UNITS[m[2]!]!;
  const t = Date.parse(value);
  if (Number.isNaN(t)) throw badRequest(`query.since: '${value}' is neither a duration (15m, 6h, 7d) nor an RFC 3339 time`);
  return t / 1000;
}

const notFound = (what: string) => new AppError(404, 'NOT_FOUND', `${what} not found`);
const forbidden = (message: string, code = 'FORBIDDEN') => new AppError(403, code, message);
const iso = (seconds: number) => new Date(seconds * 1000).toISOString();

const seriesAnswer = (r: QueryResult) => ({
  since: iso(r.since),
  until: iso(r.until),
  step: r.step,
  timestamps: r.timestamps,
  series: r.series.map((s) => ({ container: s.key.container, metric: s.key.metric, values: s.values })),
});

export function createHandlers(d: Deps): Record<string, Handler> {
  const cfg = () => d.settings.get();
  const visibleReadings = (req: Request): ContainerReading[] => [...d.collector.latest.values()].filter((r) => canReach(req.principal, r.info.deployment));
  /** A deployment named in the query must be one the caller can see (404 otherwise, like the core). */
  /** An alert event is seen with its container's deployment and its rule's (`*`: a global rule). */
  const ruleVisible = (p: Request['principal'], scope: string | null) => scope === null || canUseRuleScope(p, scope === '*' ? null : scope, 'read');
  const deploymentParam = (req: Request, required: boolean): string | undefined => {
    const name = req.query.get('deployment') ?? undefined;
    if (name === undefined) {
      if (required) throw badRequest('query.deployment: required field is missing');
      return undefined;
    }
    if (!req.principal.canAccessDeployment(name)) throw notFound(`deployment '${name}'`);
    return name;
  };
  const sinceOf = (req: Request) => Math.max(parseSince(req.query.get('since')), Date.now() / 1000 - cfg().rollup_retention);
  const limitOf = (req: Request) => Math.min(1000, Math.max(1, Number(req.query.get('limit') ?? 100) || 100));
  const ruleView = (r: Rule) => r;

  return {
    'observability.metricsLatest': (req) => {
      const only = deploymentParam(req, false);
      const groups = new Map<string | null, ContainerReading[]>();
      for (const r of visibleReadings(req)) {
        if (only !== undefined && r.info.deployment !== only) continue;
        const list = groups.get(r.info.deployment) ?? [];
        list.push(r);
        groups.set(r.info.deployment, list);
      }
      return [...groups.entries()]
        .sort(([a], [b]) => compareText(a ?? '\uffff', b ?? '\uffff'))
        .map(([deployment, list]) => ({
          deployment,
          containers: list
            .sort((a, b) => compareText(a.info.name, b.info.name))
            .map((r) => ({
              container: r.info.name,
              id: r.info.id,
              metrics: r.metrics,
              updated: new Date(r.updated).toISOString(),
            })),
        }));
    },

    'observability.metricsTimeseries': (req) => {
      const deployment = deploymentParam(req, true)!;
      const rows = d.store.series({ deployment });
      return seriesAnswer(d.store.query(rows, sinceOf(req), cfg().sample_interval, cfg().raw_retention));
    },

    'observability.metricsSeries': (req) => {
      const deployment = deploymentParam(req, false);
      const container = req.query.get('container') ?? '';
      const metric = req.query.get('metric') ?? '';
      const row = d.store.series({ container, metric })[0];
      if (!row || !canReach(req.principal, row.deployment) || (deployment !== undefined && row.deployment !== deployment)) {
        throw notFound(`series ${metric} of container '${container}'`);
      }
      return seriesAnswer(d.store.query([row], sinceOf(req), cfg().sample_interval, cfg().raw_retention));
    },

    'observability.metricsHost': (req) => {
      const rows = d.store.series({ host: true });
      const r = d.store.query(rows, sinceOf(req), cfg().sample_interval, cfg().raw_retention);
      const host = d.collector.host;
      return {
        since: iso(r.since),
        until: iso(r.until),
        step: r.step,
        timestamps: r.timestamps,
        latest: host.metrics,
        updated: host.updated ? new Date(host.updated).toISOString() : null,
        series: r.series.map((s) => ({ metric: s.key.metric, values: s.values })),
      };
    },

    'observability.metricsPrometheus': (req) => ({
      text: exposition(visibleReadings(req), d.collector.host),
      contentType: 'text/plain; version=0.0.4; charset=utf-8',
    }),

    'observability.health': (req) => {
      const only = deploymentParam(req, false);
      return d.collector.containers
        .filter((c) => canReach(req.principal, c.deployment) && (only === undefined || c.deployment === only))
        .sort((a, b) => compareText(a.name, b.name))
        .map((c) => {
          const w = d.watcher.status(c.name);
          return {
            container: c.name,
            id: c.id,
            deployment: c.deployment,
            status: c.health,
            state: c.state,
            restarts_by_watcher: w.restarts,
            gave_up: w.gaveUp,
          };
        });
    },

    'observability.healthEvents': (req) => {
      const deployment = deploymentParam(req, false);
      return d.journal.healthEvents((dep) => canReach(req.principal, dep), { deployment, limit: limitOf(req) });
    },

    'observability.listRules': async (req) => {
      await d.deletions.sync();
      return d.alerts.rules.filter((r) => canUseRuleScope(req.principal, r.deployment, 'read')).map(ruleView);
    },

    'observability.replaceRules': async (req) => {
      await d.deletions.sync();
      const input = req.body as RuleInput[];
      const p = req.principal;
      const now = new Date().toISOString();
      const editable = (r: Rule) => canUseRuleScope(p, r.deployment, 'write');
      const readable = (r: Rule) => canUseRuleScope(p, r.deployment, 'read');
      // Rules the caller cannot change stay as they are; those it cannot even see are neither shown nor told about.
      const kept = d.alerts.rules.filter((r) => !editable(r));
      const hidden = new Set(kept.filter((r) => !readable(r)).map((r) => r.id));
      const taken = new Set(d.alerts.rules.map((r) => r.id));
      const ids = new Set<string>();
      const next: Rule[] = [];
      input.forEach((raw, i) => {
        const at = `body[${i}]`;
        const deployment = raw.deployment ?? null;
        const host = HOST_METRIC_NAMES.includes(raw.metric);
        // An id of a rule the caller cannot see is as good as none: a new id is chosen (nothing tells it exists).
        let id: string | undefined = raw.id !== undefined && hidden.has(raw.id) ? undefined : raw.id;
        const same = id !== undefined ? kept.find((k) => k.id === id) : undefined;
        if (same) {
          // A rule the caller may read but not change, sent back as it was: keep it.
          if (!sameContent(normalizeRule(raw, same.id), same)) throw forbidden(`${at}: rule '${same.name}' belongs to a deployment you may only read`);
          ids.add(same.id);
          return;
        }
        if (host && deployment !== null) throw badRequest(`${at}.deployment: host metric ${raw.metric} is not tied to a deployment`);
        if (deployment === null) {
          if (!p.isGlobal)
            throw forbidden(
              `${at}.deployment: rules of every container or of the host are global; you are limited to your deployments`,
              'GLOBAL_SCOPE_REQUIRED',
            );
          if (!canUseRuleScope(p, null, 'write'))
            throw forbidden(`${at}.deployment: rules of every container or of the host need write access to every deployment`);
        } else {
          // The same answers as the core's for a deployment named in a request.
          if (!p.deploymentLevel(deployment)) throw notFound(`${at}.deployment: deployment '${deployment}'`);
          if (!p.canAccessDeployment(deployment, 'write')) throw forbidden(`${at}.deployment: 'write' access to deployment '${deployment}' required`);
        }
        if (raw.action === 'restart' && host) throw badRequest(`${at}.action: restart needs a container metric`);
        if (id === undefined) {
          do id = randomUUID().slice(0, 8);
          while (taken.has(id) || ids.has(id));
        }
        const before = d.alerts.rules.find((r) => r.id === id && editable(r));
        let rule = normalizeRule(raw, id, { created_by: p.id, written_at: now });
        // Sent back unchanged: still the rule its creator wrote (its action keeps running with the creator's rights).
        if (before && sameContent(before, rule)) rule = before;
        if (ids.has(rule.id) || (taken.has(rule.id) && !before)) throw badRequest(`${at}.id: duplicate id '${rule.id}'`);
        ids.add(rule.id);
        next.push(rule);
      });
      // Read-only rules not sent back stay too: the caller cannot delete them.
      d.alerts.setRules([...kept, ...next]);
      return d.alerts.rules.filter(readable).map(ruleView);
    },

    'observability.firingAlerts': (req) =>
      d.alerts
        .firing()
        .filter((s) => canReach(req.principal, s.deployment) && canUseRuleScope(req.principal, s.rule.deployment, 'read'))
        .map((s) => ({
          rule_id: s.rule.id,
          rule_name: s.rule.name,
          deployment: s.deployment,
          container: s.container,
          metric: s.rule.metric,
          comparison: s.rule.comparison,
          threshold: s.rule.threshold,
          value: s.value,
          state: s.state,
          since: new Date(s.since).toISOString(),
        })),

    'observability.alertEvents': (req) => {
      const deployment = deploymentParam(req, false);
      return d.journal
        .alertEvents((dep, row) => canReach(req.principal, dep) && ruleVisible(req.principal, row.rule_scope), {
          deployment,
          rule: req.query.get('rule') ?? undefined,
          limit: limitOf(req),
        })
        .map(({ rule_scope: _scope, ...event }) => event);
    },

    'observability.getConfig': () => d.settings.runtime(),

    'observability.updateConfig': (req) => {
      const patch = req.body as ConfigPatch;
      const merged = { ...d.settings.runtime(), ...patch };
      if (merged.raw_retention > merged.rollup_retention) throw badRequest('body.raw_retention: must not exceed rollup_retention');
      return d.settings.update(patch);
    },
  };
}
