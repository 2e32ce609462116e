/**
 * Alert rules and their evaluation after every collection round. Per rule and container (or the host):
 * inactive → pending (breached) → firing (breached for `for_seconds`) → resolved (no longer breached).
 * Firing and resolving notify the rule's targets; `action: restart` restarts the container when it fires, once the
 * agent confirmed that the rule's creator may still write to the container's deployment (background work re-checks
 * its principal at every run; the firing event says why a restart was not run).
 * States are persisted so an app restart neither forgets a firing alert nor notifies it twice.
 */
import { randomUUID } from 'node:crypto';
import { join } from 'node:path';
import type { Notice } from './notice.js';
import { HOST_METRIC_NAMES, type RuleInput } from '../app-routes.js';
import type { Collector } from './collector.js';
import { readJson, writeJson } from './files.js';
import type { Journal } from './journal.js';
import type { Logger } from './log.js';

export interface Rule {
  id: string;
  name: string;
  deployment: string | null;
  metric: string;
  comparison: 'above' | 'below';
  threshold: number;
  for_seconds: number;
  enabled: boolean;
  targets: string[];
  action: '' | 'restart';
  /** The principal that last wrote the rule (`user:<id>`, `api_key:<id>`); null for rules from before it was recorded. */
  created_by: string | null;
  /** When the rule was last written (ISO): rules written before their deployment's deletion go with it. */
  written_at: string | null;
}

/** What a rule does (what a writer changes); `created_by` and `written_at` are the app's. */
export const ruleContent = (r: Rule) => ({
  id: r.id,
  name: r.name,
  deployment: r.deployment,
  metric: r.metric,
  comparison: r.comparison,
  threshold: r.threshold,
  for_seconds: r.for_seconds,
  enabled: r.enabled,
  targets: r.targets,
  action: r.action,
});
export const sameContent = (a: Rule, b: Rule): boolean => JSON.stringify(ruleContent(a)) === JSON.stringify(ruleContent(b));

export interface AlertState {
  key: string;
  rule_id: string;
  container: string | null;
  container_id: string | null;
  deployment: string | null;
  state: 'pending' | 'firing';
  since: number;
  value: number;
  /** When the container was last seen missing (restarting, recreated): resolved only once gone for a while. */
  missing_since?: number | null;
}

/** How long a container may be missing (a restart, a recreate) before its alerts count as resolved. */
const MISSING_GRACE_MS = 30_000;

export interface AlertActions {
  notify(m: Notice): Promise<void>;
  /** Why the rule's creator may not run its action on a container of `deployment` now, or null when it may. */
  authorize(creator: string | null, deployment: string | null): Promise<string | null>;
  restart(containerId: string, containerName: string, deployment: string | null, reason: string): Promise<void>;
}

export const normalizeRule = (
  r: RuleInput,
  id?: string,
  by: { created_by: string | null; written_at: string | null } = { created_by: null, written_at: null },
): Rule => ({
  id: id ?? r.id ?? randomUUID().slice(0, 8),
  name: r.name,
  deployment: r.deployment ?? null,
  metric: r.metric,
  comparison: r.comparison,
  threshold: r.threshold,
  for_seconds: r.for_seconds,
  enabled: r.enabled ?? true,
  targets: r.targets ?? [],
  action: r.action ?? '',
  created_by: by.created_by,
  written_at: by.written_at,
});

const fmt = (metric: string, v: number): string => {
  if (metric.endsWith('.utilization')) return `${(v * 100).toFixed(1)}%`;
  if (metric === 'container.cpu.usage') return `${v.toFixed(3)} CPU`;
  if (Math.abs(v) >= 1024 * 1024) return `${(v / 1024 / 1024).toFixed(1)} MiB${metric.includes('network') ? '/s' : ''}`;
  return `${Number(v.toFixed(3))}${metric.includes('network') ? ' B/s' : ''}`;
};

export class AlertEngine {
  private readonly file: string;
  rules: Rule[];
  private readonly states = new Map<string, AlertState>();
  /** Last restart done by a rule, per rule and container: at most one per `restartCooldownMs`. */
  private readonly restarted = new Map<string, number>();

  constructor(
    dataDir: string,
    private readonly journal: Journal,
    private readonly actions: AlertActions,
    private readonly log: Logger,
    private readonly restartCooldownMs: () => number,
  ) {
    this.file = join(dataDir, 'rules.json');
    // Rules from before creators were recorded read as having none (their actions do not run until rewritten).
    this.rules = readJson<Rule[]>(this.file, []).map((r) => ({ ...r, created_by: r.created_by ?? null, written_at: r.written_at ?? null }));
    for (const s of journal.loadStates<AlertState>()) this.states.set(s.key, s);
  }

  setRules(rules: Rule[]): void {
    this.rules = rules;
    writeJson(this.file, rules);
  }

  /**
   * A deployment was deleted at `deletedAt` (ms): its rules written before then go, with their alert states (a new
   * deployment of the same name starts without them; rules written for it since are its own).
   */
  removeDeployment(deployment: string, deletedAt: number): string[] {
    const doomed = this.rules.filter((r) => r.deployment === deployment && (r.written_at === null || Date.parse(r.written_at) < deletedAt));
    const ids = new Set(doomed.map((r) => r.id));
    if (ids.size) this.setRules(this.rules.filter((r) => !ids.has(r.id)));
    // States of its containers go too, also under rules of every container: a new container of the same name
    // starts inactive, without the old one's pending time or restart cooldown.
    let changed = false;
    for (const [key, state] of this.states) {
      if (!ids.has(state.rule_id) && state.deployment !== deployment) continue;
      this.states.delete(key);
      this.restarted.delete(key);
      changed = true;
    }
    if (changed) this.journal.saveStates([...this.states.values()].map((s) => ({ key: s.key, value: s })));
    return [...ids];
  }

  firing(): (AlertState & { rule: Rule })[] {
    return [...this.states.values()].flatMap((s) => {
      const rule = this.rules.find((r) => r.id === s.rule_id);
      return rule ? [{ ...s, rule }] : [];
    });
  }

  /** Runs after each collection round. */
  evaluate(collector: Collector, now = Date.now()): void {
    const touched = new Set<string>();
    const running = new Set(collector.containers.map((c) => c.name));
    for (const rule of this.rules) {
      if (!rule.enabled) continue;
      const subjects: { container: string | null; id: string | null; deployment: string | null; value: number | undefined }[] = [];
      if (HOST_METRIC_NAMES.includes(rule.metric)) {
        subjects.push({ container: null, id: null, deployment: null, value: collector.host.metrics[rule.metric] });
      } else {
        for (const r of collector.latest.values()) {
          if (rule.deployment !== null && r.info.deployment !== rule.deployment) continue;
          subjects.push({ container: r.info.name, id: r.info.id, deployment: r.info.deployment, value: r.metrics[rule.metric] });
        }
      }
      for (const subject of subjects) {
        const key = `${rule.id}|${subject.container ?? '@host'}`;
        touched.add(key);
        // No value this round (first sample after a start): keep the state as it is.
        if (subject.value === undefined) continue;
        const breached = rule.comparison === 'above' ? subject.value > rule.threshold : subject.value < rule.threshold;
        const state = this.states.get(key);
        if (state) state.missing_since = null;
        if (!breached) {
          if (state?.state === 'firing') this.resolve(rule, state, subject.value, 'back within the threshold');
          this.states.delete(key);
          continue;
        }
        if (!state) {
          const fresh: AlertState = {
            key,
            rule_id: rule.id,
            container: subject.container,
            container_id: subject.id,
            deployment: subject.deployment,
            state: 'pending',
            since: now,
            value: subject.value,
          };
          this.states.set(key, fresh);
          this.record(
            rule,
            fresh,
            'pending',
            `${this.describe(rule, fresh)} is ${fmt(rule.metric, subject.value)}, ${rule.comparison} ${fmt(rule.metric, rule.threshold)}`,
          );
          if (rule.for_seconds === 0) this.fire(rule, fresh, now);
          continue;
        }
        state.value = subject.value;
        state.container_id = subject.id ?? state.container_id;
        if (state.state === 'pending' && now - state.since >= rule.for_seconds * 1000) this.fire(rule, state, now);
      }
    }
    // States no round touched: the rule was removed or disabled, or the container is gone.
    for (const [key, state] of this.states) {
      if (touched.has(key)) continue;
      const rule = this.rules.find((r) => r.id === state.rule_id);
      if (state.container !== null && rule?.enabled) {
        if (running.has(state.container)) continue;
        state.missing_since ??= now;
        if (now - state.missing_since < MISSING_GRACE_MS) continue;
      }
      if (state.state === 'firing' && rule) {
        this.resolve(rule, state, null, !rule.enabled ? 'the rule was disabled' : 'the container is no longer running');
      }
      this.states.delete(key);
    }
    this.journal.saveStates([...this.states.values()].map((s) => ({ key: s.key, value: s })));
  }

  private describe(rule: Rule, s: AlertState): string {
    return s.container === null ? `host ${rule.metric}` : `${rule.metric} of ${s.container}${s.deployment ? ` (deployment ${s.deployment})` : ''}`;
  }

  private record(rule: Rule, s: AlertState, state: 'pending' | 'firing' | 'resolved', message: string, value: number | null = s.value): void {
    this.journal.addAlertEvent({
      rule_id: rule.id,
      rule_name: rule.name,
      deployment: s.deployment,
      container: s.container,
      metric: rule.metric,
      value,
      threshold: rule.threshold,
      state,
      message,
      rule_scope: rule.deployment ?? '*',
    });
  }

  private fire(rule: Rule, s: AlertState, now: number): void {
    s.state = 'firing';
    const held = Math.round((now - s.since) / 1000);
    const message = `${this.describe(rule, s)} is ${fmt(rule.metric, s.value)}, ${rule.comparison} ${fmt(rule.metric, rule.threshold)} for ${held} s`;
    if (rule.action !== 'restart' || !s.container_id || !s.container) return this.announce(rule, s, message);
    const last = this.restarted.get(s.key) ?? 0;
    if (now - last < this.restartCooldownMs()) {
      this.log.info('restart skipped: cooldown', { rule: rule.name, container: s.container });
      return this.announce(rule, s, `${message}; not restarted again: this rule restarted it less than the health cooldown ago`);
    }
    this.restarted.set(s.key, now);
    const [id, name, deployment] = [s.container_id, s.container, s.deployment];
    // The creator's rights of the moment decide, not those it had when it wrote the rule.
    void this.actions.authorize(rule.created_by, deployment).then((refused) => {
      if (refused) {
        this.log.warn('alert action not run', { rule: rule.name, container: name, reason: refused });
        return this.announce(rule, s, `${message}; restart not run: ${refused}`);
      }
      this.announce(rule, s, `${message}; restarting the container (at most once per health cooldown)`);
      return this.actions.restart(id, name, deployment, `alert rule '${rule.name}' fired`);
    });
  }

  /** The firing event and its notification. */
  private announce(rule: Rule, s: AlertState, message: string): void {
    this.record(rule, s, 'firing', message);
    this.log.info('alert firing', { rule: rule.name, container: s.container, value: s.value });
    void this.actions.notify({
      event: 'alert.fired',
      severity: 'warning',
      title: `Alert firing: ${rule.name}`,
      message,
      deployment: s.deployment,
      targets: rule.targets,
    });
  }

  private resolve(rule: Rule, s: AlertState, value: number | null, why: string): void {
    const message = `${this.describe(rule, s)}: ${why}${value === null ? '' : ` (${fmt(rule.metric, value)})`}`;
    this.record(rule, s, 'resolved', message, value);
    this.log.info('alert resolved', { rule: rule.name, container: s.container });
    void this.actions.notify({
      event: 'alert.resolved',
      severity: 'info',
      title: `Alert resolved: ${rule.name}`,
      message,
      deployment: s.deployment,
      targets: rule.targets,
    });
  }
}
