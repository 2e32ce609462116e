// Test fixture: a consumer of the `docker` service, as other plugins use it (exec, streams, networks, compose, events).
import { definePlugin, Type } from '@agent/sdk';
import { dockerService } from '@agent/plugin-docker/api';

export default definePlugin({
  name: 'docker-probe',
  version: '0.0.0',
  resources: { probe: { description: 'test fixture' } },
  deps: { docker: dockerService },
  setup(ctx, { docker }) {
    const events = [];
    docker.onEvent((e) => {
      events.push(e);
      if (events.length > 500) events.shift();
    });
    const route = (method, path, handler, body) =>
      ctx.route({ method, path: `/probe/${path}`, permission: 'probe:write', summary: path, audit: false, ...(body ? { body } : {}), handler });
    const Any = Type.Object({}, { additionalProperties: true });
    route('GET', 'info', () => docker.info());
    route('GET', 'compose-flavour', () => docker.compose.flavour());
    route('GET', 'events', () => events);
    route('POST', 'inspect', (req) => docker.inspectContainer(req.body.id), Any);
    route('POST', 'stats', (req) => docker.stats(req.body.id), Any);
    route('POST', 'exec', (req) => docker.exec(req.body.id, req.body.argv, req.body.options ?? {}), Any);
    route(
      'POST',
      'exec-stream',
      async (req) => {
        const s = await docker.execStream(req.body.id, req.body.argv, { stdin: req.body.stdin !== undefined });
        if (s.stdin) s.stdin.end(req.body.stdin);
        let bytes = 0;
        const head = [];
        for await (const chunk of s.stdout) {
          bytes += chunk.length;
          if (head.length < 1) head.push(chunk.toString('utf8').slice(0, 100));
        }
        return { bytes, head: head.join(''), exit_code: await s.wait(), stderr: s.stderr() };
      },
      Any,
    );
    route(
      'POST',
      'network',
      async (req) => {
        await docker.networks.ensure(req.body.name, { labels: { 'agent.test': '1' } });
        await docker.networks.ensure(req.body.name);
        await docker.networks.connect(req.body.name, req.body.container, { aliases: ['probe-alias'] });
        await docker.networks.connect(req.body.name, req.body.container);
        const connected = (await docker.inspectContainer(req.body.container)).networks;
        await docker.networks.disconnect(req.body.name, req.body.container);
        await docker.networks.disconnect(req.body.name, req.body.container);
        return { connected, after: (await docker.inspectContainer(req.body.container)).networks };
      },
      Any,
    );
    route(
      'POST',
      'compose',
      async (req) => {
        const lines = [];
        const checked = await docker.compose.check({ project: req.body.project, dir: req.body.dir, content: req.body.content, env: req.body.env ?? {} });
        const result = await docker.compose.run(checked, req.body.command, { onLine: (l) => lines.push(l) });
        return { ...result, lines: lines.length, services: checked.services, hash: checked.hash };
      },
      Any,
    );
    // A model the guard did not check (as a plugin could try to build one) is never run.
    route(
      'POST',
      'compose-forged',
      async (req) => {
        const checked = await docker.compose.check({ project: req.body.project, dir: req.body.dir, content: req.body.content });
        return docker.compose.run({ ...checked, model: { services: { evil: { image: 'x', privileged: true } } } }, { command: 'up' });
      },
      Any,
    );
    route(
      'POST',
      'logs',
      async (req) => {
        const out = [];
        for await (const line of docker.containerLogs(req.body.id, req.body.options ?? {})) out.push(line);
        return out;
      },
      Any,
    );
  },
});
