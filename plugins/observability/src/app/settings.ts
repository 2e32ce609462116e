/**
 * Runtime settings: the `observability` section of agent.yaml gives the defaults; `PUT config` stores overrides in
 * the app data folder (they win over the file until changed again).
 */
import { join } from 'node:path';
import type { ConfigPatch, RuntimeConfig } from '../app-routes.js';
import { readJson, writeJson } from './files.js';

export interface StaticConfig extends RuntimeConfig {
  docker_socket: string;
  container_labels: Record<string, string>;
  disk_path: string;
  stats_concurrency: number;
}

export class Settings {
  private readonly file: string;
  private overrides: ConfigPatch;
  private listeners: ((c: RuntimeConfig) => void)[] = [];

  constructor(
    dataDir: string,
    private readonly base: StaticConfig,
  ) {
    this.file = join(dataDir, 'config.json');
    this.overrides = readJson<ConfigPatch>(this.file, {});
  }

  get(): StaticConfig {
    const o = this.overrides;
    return {
      ...this.base,
      ...(o.sample_interval !== undefined ? { sample_interval: o.sample_interval } : {}),
      ...(o.raw_retention !== undefined ? { raw_retention: o.raw_retention } : {}),
      ...(o.rollup_retention !== undefined ? { rollup_retention: o.rollup_retention } : {}),
      health: { ...this.base.health, ...o.health },
      alerts: { ...this.base.alerts, ...o.alerts },
    };
  }

  runtime(): RuntimeConfig {
    const c = this.get();
    return { sample_interval: c.sample_interval, raw_retention: c.raw_retention, rollup_retention: c.rollup_retention, health: c.health, alerts: c.alerts };
  }

  update(patch: ConfigPatch): RuntimeConfig {
    const o = this.overrides;
    this.overrides = {
      ...o,
      ...(patch.sample_interval !== undefined ? { sample_interval: patch.sample_interval } : {}),
      ...(patch.raw_retention !== undefined ? { raw_retention: patch.raw_retention } : {}),
      ...(patch.rollup_retention !== undefined ? { rollup_retention: patch.rollup_retention } : {}),
      ...(patch.health ? { health: { ...o.health, ...patch.health } } : {}),
      ...(patch.alerts ? { alerts: { ...o.alerts, ...patch.alerts } } : {}),
    };
    writeJson(this.file, this.overrides);
    const now = this.runtime();
    for (const l of this.listeners) l(now);
    return now;
  }

  onChange(listener: (c: RuntimeConfig) => void): void {
    this.listeners.push(listener);
  }
}
