// The baseline of the http benchmark: a bare koa hello-world answering JSON.
import Koa from 'koa';

const app = new Koa();
app.use((ctx) => {
  ctx.body = { data: 'hello' };
});
const server = app.listen(0, '127.0.0.1', () => console.log(`http://127.0.0.1:${server.address().port}/`));
