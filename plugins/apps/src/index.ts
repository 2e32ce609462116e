/**
 * apps: runs the processes of app plugins (plugins whose definition has `app`) and tells the kernel where each
 * listens and with which secret (the app directory, read by the plugin proxy and the plugin list). Always loaded.
 */
import { appDirectory, coreServices, definePlugin, principalDirectory } from '@agent/sdk';
import { AppHost } from './app-host.js';

export default definePlugin({
  name: 'apps',
  version: '0.1.0',
  description: 'Runs app plugins as child processes on loopback ports, restarted with backoff',
  deps: { plugins: coreServices.plugins, principals: principalDirectory },
  provides: { apps: appDirectory },

  setup(ctx, { plugins, principals }) {
    const host = new AppHost(
      ctx.log,
      ctx.agent.dataDir,
      () => ctx.agent.url(),
      (name) => principals.issueSystemToken(name),
    );
    // Apps start once the agent listens, not in `start`: they are given its URL, and every plugin has started.
    ctx.events.on('agent.ready', () => {
      for (const app of plugins.apps()) host.start(app);
    });
    return {
      provides: { apps: { state: (name) => host.state(name) } },
      stop: () => host.stopAll(),
    };
  },
});
