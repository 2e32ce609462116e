// The baselines of the http benchmark: the chosen stack with nothing of the agent — koa, one @koa/router router and
// koa-body — answering GET /api/auth/validate with the JSON the agent answers (given as the first argument), so the
// ratio measures only what the agent adds (authentication, checks, its envelope). The second argument picks how:
// - `text` (default): the answer's text, as it is;
// - `object`: the same JSON from an object koa serializes on each request, the way a koa app usually answers;
// - `job`: the least a koa app must do to give this answer: the bearer token (env BENCH_TOKEN) looked up in a Map, the
//   answer built from that principal on each request and serialized (a 401 for any other token). No routing among
//   many routes, no permission, tenancy or input checks: a floor under what the agent can cost, not a rival to it.
import { createRequire } from 'node:module';
import { join } from 'node:path';

// The same packages the kernel runs (core's own dependencies, not whatever else the workspace holds).
const require = createRequire(join(import.meta.dirname, '..', 'core', 'package.json'));
const Koa = require('koa');
const Router = require('@koa/router');
const { koaBody } = require('koa-body');

const body = process.argv[2] ?? '{"data":null}';
const mode = process.argv[3] ?? 'text';
const JSON_TYPE = 'application/json; charset=utf-8';

function jobHandler() {
  const { principal, tenancy } = JSON.parse(body).data;
  const principals = new Map([[process.env.BENCH_TOKEN, principal]]);
  return (ctx) => {
    const m = /^Bearer\s+(\S+)\s*$/i.exec(ctx.get('Authorization'));
    const p = m ? principals.get(m[1]) : undefined;
    ctx.type = JSON_TYPE;
    if (!p) {
      ctx.status = 401;
      ctx.body = JSON.stringify({ error: 'invalid or expired token', code: 'UNAUTHORIZED' });
      return;
    }
    const global = p.scope === 'global';
    const names = Object.keys(p.deployments).filter((n) => n !== '*');
    const answer = {
      valid: true,
      principal: p,
      tenancy: {
        scope: p.scope,
        summary: global
          ? `global: every deployment at level ${p.deployments['*'] ?? 'none'} (more where granted), and global state as far as the permissions go`
          : `limited to ${names.length} deployment(s) (${names.join(', ') || 'none'}): nothing global, whatever the role says`,
        deployments: p.deployments,
        global_writes: global && p.permissions.some((x) => x.endsWith(':write')),
        resources: tenancy.resources,
      },
    };
    ctx.body = JSON.stringify({ data: answer });
  };
}

const value = mode === 'object' ? JSON.parse(body) : null;
const handlers = {
  text: (ctx) => {
    ctx.type = JSON_TYPE;
    ctx.body = body;
  },
  object: (ctx) => {
    ctx.body = value;
  },
  job: mode === 'job' ? jobHandler() : null,
};
const app = new Koa();
const router = new Router({ prefix: '/api' });
router.get('/auth/validate', koaBody(), handlers[mode]);
app.use(router.routes());
const server = app.listen(0, '127.0.0.1', () => console.log(`http://127.0.0.1:${server.address().port}/api/auth/validate`));
