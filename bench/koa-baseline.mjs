// The baseline of the http benchmark: the chosen stack with nothing of the agent — koa, one @koa/router router and
// koa-body — answering GET /api/auth/validate with the JSON the agent answers (given as the first argument), so the
// ratio measures only what the agent adds (authentication, checks, its envelope). With `object` as the second
// argument it answers the same JSON the way a koa app usually does, from an object koa serializes on each request.
import { createRequire } from 'node:module';
import { join } from 'node:path';

// The same packages the kernel runs (core's own dependencies, not whatever else the workspace holds).
const require = createRequire(join(import.meta.dirname, '..', 'core', 'package.json'));
const Koa = require('koa');
const Router = require('@koa/router');
const { koaBody } = require('koa-body');

const body = process.argv[2] ?? '{"data":null}';
const asObject = process.argv[3] === 'object';
const value = asObject ? JSON.parse(body) : null;
const app = new Koa();
const router = new Router({ prefix: '/api' });
router.get('/auth/validate', koaBody(), (ctx) => {
  if (asObject) {
    ctx.body = value;
    return;
  }
  ctx.type = 'application/json; charset=utf-8';
  ctx.body = body;
});
app.use(router.routes());
const server = app.listen(0, '127.0.0.1', () => console.log(`http://127.0.0.1:${server.address().port}/api/auth/validate`));
