/**
 * console: serves the web console at `/`, on the agent's own origin (no second server, no CDN, works offline).
 * The console is a static build of the `@agent/console` workspace (`console/dist`, made by `npm run build`); it
 * talks to `/api` with a token it keeps in the tab's session storage. The kernel serves the files (`ctx.site`) with
 * its security headers. Disable with `console.enabled: false` (or `plugins.enabled: ['*', '!console']`).
 */
import { existsSync } from 'node:fs';
import { isAbsolute, join, resolve } from 'node:path';
import { definePlugin, Type } from '@agent/sdk';

export default definePlugin({
  name: 'console',
  version: '0.1.0',
  description: 'The web console at /',
  config: Type.Object({
    console: Type.Object(
      {
        enabled: Type.Boolean({ default: true, description: 'serve the web console at /' }),
        path: Type.String({ default: '', description: 'folder of the console build; empty: console/dist of this agent' }),
      },
      { default: {} },
    ),
  }),

  setup(ctx) {
    const { enabled, path } = ctx.config.console;
    if (!enabled) return;
    // Built-in plugins run from a bundle, but packageDir is still plugins/console of the agent's folder.
    const root = path ? (isAbsolute(path) ? path : resolve(path)) : join(ctx.packageDir, '..', '..', 'console', 'dist');
    if (!existsSync(join(root, 'index.html'))) {
      ctx.log.warn('the web console is not built: `npm run build` builds it; / answers 404 until then', { root });
      return;
    }
    ctx.site({ root, fallback: 'index.html', immutable: ['assets'] });
  },
});
