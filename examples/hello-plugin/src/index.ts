/**
 * hello-plugin: what a third-party plugin looks like. Everything comes from `@agent/sdk`:
 * routes with JSON Schemas (validated and documented), a plannable create/delete, a scheduled job, a typed event
 * of its own, a lowdb document and a SQLite journal table, a runtime setting and a config section.
 */
import { defineOperation, definePlugin, errors, operationRoute, reply, Type, type Static } from '@agent/sdk';

// Plugins add their own events to the bus by declaration merging.
declare module '@agent/sdk' {
  interface AgentEvents {
    'hello.greeted': { id: number; name: string };
  }
}

const Greeting = Type.Object({
  id: Type.Integer(),
  name: Type.String(),
  message: Type.String(),
  created_at: Type.String({ format: 'date-time' }),
});
type Greeting = Static<typeof Greeting>;

const NAME = '^[A-Za-z][A-Za-z0-9 _-]{0,39}$';

export default definePlugin({
  name: 'hello',
  version: '1.0.0',
  description: 'Greetings: an example third-party plugin',
  config: Type.Object({
    hello: Type.Object({ greeting: Type.String({ default: 'Hello', maxLength: 40 }) }, { default: {} }),
  }),
  resources: { greetings: { description: 'greetings kept by the hello plugin', operator: 'write', viewer: 'read' } },

  // POST /api/plugins/hello/deployments {name, config} creates a deployment from this: a web page with a greeting.
  deployable: {
    summary: 'A tiny web server (busybox httpd) answering with a greeting, published on 127.0.0.1',
    config: Type.Object({
      greeting: Type.String({ default: 'Hello from the hello plugin', maxLength: 200 }),
      image: Type.String({ default: 'busybox:1.36', pattern: '^[a-z0-9][a-z0-9._/-]*(:[A-Za-z0-9._-]+)?$', maxLength: 200 }),
      port: Type.Integer({ default: 8088, minimum: 1024, maximum: 65535 }),
    }),
    // The compose file is rendered as JSON (valid YAML), and the greeting travels through .env, so no value from
    // the request is ever pasted into compose or shell text.
    render: (config) => ({
      compose_content: JSON.stringify(
        {
          services: {
            web: {
              image: config.image,
              command: ['sh', '-c', 'mkdir -p /srv && printf "%s\\n" "$$GREETING" > /srv/index.html && exec httpd -f -p 8080 -h /srv'],
              environment: { GREETING: '${GREETING}' },
              ports: [`127.0.0.1:${config.port}:8080`],
            },
          },
        },
        null,
        2,
      ),
      env_vars: [{ key: 'GREETING', value: config.greeting }],
    }),
  },

  async setup(ctx) {
    const doc = await ctx.store.document({ next_id: 1, greetings: [] as Greeting[] });
    const db = ctx.store.journal();
    db.exec('CREATE TABLE IF NOT EXISTS ticks (id INTEGER PRIMARY KEY, at TEXT NOT NULL, greetings INTEGER NOT NULL)');
    const settings = ctx.settings(Type.Object({ shout: Type.Boolean({ default: false, description: 'greet in capitals' }) }));
    let eventsSeen = 0;
    ctx.events.on('hello.greeted', () => {
      eventsSeen++;
    });

    const compose = (name: string, message?: string) => {
      const text = message ?? `${ctx.config.hello.greeting}, ${name}!`;
      return settings.get().shout ? text.toUpperCase() : text;
    };
    const find = (id: number) => doc.data.greetings.find((g) => g.id === id);

    ctx.route({
      method: 'GET',
      path: '/hello/greetings',
      permission: 'greetings:read',
      operationId: 'hello.list',
      summary: 'List greetings',
      query: Type.Object({ name: Type.Optional(Type.String({ pattern: NAME, description: 'only greetings for this name' })) }),
      response: Type.Array(Greeting),
      handler: (req) => doc.data.greetings.filter((g) => !req.query.name || g.name === req.query.name),
    });

    // Each change is an operation: `prepare` does every check and says what a plan shows, `apply` makes the change.
    // The route, its `?plan=true` preview and a plan's apply all run the same operation, so they cannot disagree.
    const greet = defineOperation({
      name: 'hello.greet',
      input: Type.Object({
        name: Type.String({ pattern: NAME, description: 'who to greet' }),
        message: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
      }),
      resource: (input) => ({ type: 'greeting', id: input.name }),
      prepare: (input) => {
        if (doc.data.greetings.some((g) => g.name === input.name)) throw errors.conflict(`'${input.name}' was already greeted`, 'GREETING_EXISTS');
        const message = compose(input.name, input.message);
        return {
          value: { name: input.name, message },
          preview: {
            summary: `greet ${input.name}`,
            changes: [{ type: 'greeting', id: `#${doc.data.next_id}`, actions: ['create'], after: { name: input.name, message } }],
          },
          // The plan is stale if another greeting was created meanwhile (the id it would get changed).
          snapshot: { records: { next_id: doc.data.next_id } },
        };
      },
      apply: async ({ name, message }) => {
        const greeting = await doc.update((d) => {
          const g: Greeting = { id: d.next_id++, name, message, created_at: new Date().toISOString() };
          d.greetings.push(g);
          return g;
        });
        ctx.events.emit('hello.greeted', { id: greeting.id, name: greeting.name });
        return greeting;
      },
    });
    ctx.route(
      operationRoute(greet, {
        method: 'POST',
        path: '/hello/greetings',
        permission: 'greetings:write',
        operationId: 'hello.create',
        status: 201,
        summary: 'Greet someone',
        body: greet.input,
        response: Greeting,
        // Besides the kernel's answers: the name was greeted before (see `greet.prepare`).
        errors: { 409: ['GREETING_EXISTS'] },
        plannable: true,
        input: (req) => req.body,
      }),
    );

    const forget = defineOperation({
      name: 'hello.forget',
      input: Type.Object({ id: Type.Integer({ minimum: 1 }) }),
      resource: (input) => ({ type: 'greeting', id: String(input.id) }),
      prepare: ({ id }) => {
        const g = find(id);
        if (!g) throw errors.notFound(`greeting ${id} not found`);
        return {
          value: id,
          preview: { changes: [{ type: 'greeting', id: `#${g.id}`, actions: ['delete'], before: g }] },
          snapshot: { records: { greeting: g } },
        };
      },
      apply: async (id) => {
        await doc.update((d) => {
          d.greetings = d.greetings.filter((g) => g.id !== id);
        });
        return id;
      },
    });
    ctx.route(
      operationRoute(forget, {
        method: 'DELETE',
        path: '/hello/greetings/:id',
        permission: 'greetings:write',
        operationId: 'hello.delete',
        summary: 'Forget a greeting',
        params: forget.input,
        plannable: true,
        input: (req) => req.params,
        respond: (id) => reply.ok(null, `greeting ${id} deleted`),
      }),
    );

    const tick = ctx.job({
      name: 'tick',
      cron: '*/5 * * * *',
      description: 'records how many greetings exist',
      run: (run) => {
        db.prepare('INSERT INTO ticks (at, greetings) VALUES (?, ?)').run(new Date().toISOString(), doc.data.greetings.length);
        run.output(`${doc.data.greetings.length} greetings`);
      },
    });

    ctx.route({
      method: 'POST',
      path: '/hello/tick',
      permission: 'greetings:write',
      operationId: 'hello.tick',
      summary: 'Run the tick job now',
      handler: async () => tick.runNow(),
    });

    ctx.route({
      method: 'GET',
      path: '/hello/stats',
      permission: 'greetings:read',
      operationId: 'hello.stats',
      summary: 'Counters: greetings, recorded ticks, greeted events seen, next tick',
      response: Type.Object({
        greetings: Type.Integer(),
        ticks: Type.Integer(),
        events_seen: Type.Integer(),
        next_tick: Type.Union([Type.String(), Type.Null()]),
      }),
      handler: () => ({
        greetings: doc.data.greetings.length,
        ticks: (db.prepare('SELECT COUNT(*) AS n FROM ticks').get() as { n: number }).n,
        events_seen: eventsSeen,
        next_tick: tick.nextRun()?.toISOString() ?? null,
      }),
    });
  },
});
