/**
 * The apps plugin as the plugin host drives it, with the kernel's services faked: it provides the app directory,
 * starts the running app plugins only once the agent is ready (when its URL is known), and stops them with its
 * instance.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { EventEmitter } from 'node:events';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { AppDirectory, AppPlugin, PluginDirectory, PrincipalDirectory } from '@agent/sdk';
import plugin from '../src/index.js';

const silent = { debug: () => undefined, info: () => undefined, warn: () => undefined, error: () => undefined };

describe('the apps plugin', () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'apps-plugin-'));
  afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

  it('starts the app plugins once the agent is ready, and stops them with its instance', async () => {
    const bus = new EventEmitter();
    let url = '';
    const ctx = {
      name: 'apps',
      log: silent,
      agent: { version: '0.0.0', dataDir, url: () => url },
      events: {
        on: (event: string, listener: (payload: unknown) => void) => {
          bus.on(event, listener);
          return () => void bus.off(event, listener);
        },
        emit: (event: string, payload: unknown) => void bus.emit(event, payload),
      },
    };
    const probe: AppPlugin = {
      plugin: 'probe',
      packageDir: join(import.meta.dirname, 'fixtures'),
      app: { entry: 'probe-app.mjs', routes: [], env: { PROBE_MODE: 'serve' } },
      config: {},
    };
    const plugins: PluginDirectory = { deployable: () => undefined, apps: () => [probe], checks: () => [] };
    const issued: string[] = [];
    const principals = {
      issueSystemToken: async (name: string) => {
        issued.push(name);
        return `token-of-${name}`;
      },
    } as unknown as PrincipalDirectory;

    expect(plugin.deps).toMatchObject({ plugins: { id: 'core.plugins' }, principals: { id: 'principals' } });
    expect(plugin.provides).toMatchObject({ apps: { id: 'agent.apps' } });
    const instance = (await plugin.setup(ctx as never, { plugins, principals }))!;
    const apps: AppDirectory = instance.provides!.apps;
    await instance.start?.();
    // Not before the agent listens: the app is told the agent's URL.
    expect(apps.state('probe')).toBeUndefined();
    url = 'http://127.0.0.1:1234';
    ctx.events.emit('agent.ready', { url });
    const deadline = Date.now() + 15_000;
    while (apps.state('probe')?.status !== 'running' && Date.now() < deadline) await new Promise((r) => setTimeout(r, 25));
    const state = apps.state('probe')!;
    expect(state).toMatchObject({ name: 'probe', status: 'running', restarts: 0 });
    expect(issued).toEqual(['probe']);
    const seen = (await (await fetch(`http://127.0.0.1:${state.port}/`)).json()) as { env: Record<string, string> };
    expect(seen.env).toMatchObject({ AGENT_URL: 'http://127.0.0.1:1234', AGENT_APP_TOKEN: 'token-of-probe', AGENT_APP_SECRET: state.secret });

    await instance.stop?.();
    expect(apps.state('probe')).toMatchObject({ status: 'stopped', pid: null });
  });
});
