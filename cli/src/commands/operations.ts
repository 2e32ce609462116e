/**
 * One command per operation of the live description: `agentctl <group> <operation> [path args] [options]`.
 * Inputs are checked against the operation's schemas before anything is sent.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { Command, Option } from 'commander';
import {
  acceptedTypes,
  buildBody,
  fillPath,
  isJobReader,
  kebab,
  startsJob,
  parseDocument,
  skeletonJson,
  skeletonYaml,
  validateBody,
  validateParameters,
  RequestInvalidError,
  type ApiDescription,
  type Envelope,
  type Operation,
  type PlanApplyResult,
} from '@agent/client';
import { UsageError, type CliContext } from '../context.js';
import { operationHelp, operationUsage } from '../help.js';
import { readAll } from '../io.js';
import { followJob, jobIdOf, readersFor } from '../jobs.js';
import { RESERVED, cliFields, isArrayParam, isBooleanParam } from '../operation-options.js';
import { isPlan, renderPlan } from '../plan-view.js';
import { logLine, renderData, twoColumns } from '../render.js';

interface OperationOptions {
  data?: string;
  field?: string[];
  query?: string[];
  skeleton?: boolean;
  yaml?: boolean;
  plan?: boolean;
  follow?: boolean;
  outputFile?: string;
  detach?: boolean;
  dryRun?: boolean;
  [queryParam: string]: unknown;
}

const collect = (value: string, previous: string[] = []) => [...previous, value];

/** Reads the `--data` argument: `@file`, `-` (stdin) or inline JSON. */
async function readData(ctx: CliContext, source: string): Promise<{ text: string; from: string }> {
  if (source === '-') return { text: await readAll(ctx.io.stdin), from: 'stdin' };
  if (source.startsWith('@')) {
    const path = source.slice(1);
    if (path === '-') return { text: await readAll(ctx.io.stdin), from: 'stdin' };
    try {
      return { text: readFileSync(resolve(ctx.io.cwd, path), 'utf8'), from: path };
    } catch (err) {
      throw new UsageError(`--data ${source}: ${(err as NodeJS.ErrnoException).code === 'ENOENT' ? 'no such file' : (err as Error).message}`);
    }
  }
  if (/^\s*[[{]/.test(source)) return { text: source, from: '--data' };
  throw new UsageError(`--data expects @file.json, - (stdin) or inline JSON; got '${source.slice(0, 40)}'`);
}

/** Query values from the per-parameter flags and from `-q key=value`. */
function collectQuery(op: Operation, opts: OperationOptions, attributes: Map<string, string>): Record<string, unknown> {
  const query: Record<string, unknown> = {};
  for (const [attribute, name] of attributes) {
    const value = opts[attribute];
    if (value === undefined) continue;
    const param = op.queryParams.find((p) => p.name === name)!;
    query[name] = isBooleanParam(param) && value === true ? true : value;
  }
  for (const pair of opts.query ?? []) {
    const eq = pair.indexOf('=');
    if (eq <= 0) throw new UsageError(`-q ${pair}: expected key=value`);
    const key = pair.slice(0, eq);
    const value = pair.slice(eq + 1);
    const param = op.queryParams.find((p) => p.name === key);
    if (param && isArrayParam(param)) query[key] = [...((query[key] as string[] | undefined) ?? []), value];
    else query[key] = value;
  }
  return query;
}

async function requestBody(ctx: CliContext, op: Operation, opts: OperationOptions): Promise<{ body?: unknown; contentType?: string }> {
  const fields = opts.field ?? [];
  if (!op.body) {
    if (op.rawBodyType && opts.data) {
      if (!opts.data.startsWith('@') && opts.data !== '-') throw new UsageError('this operation uploads a file: --data @file (or - for stdin)');
      const raw = opts.data === '-' ? Buffer.from(await readAll(ctx.io.stdin)) : readFileSync(resolve(ctx.io.cwd, opts.data.slice(1)));
      return { body: raw, contentType: op.rawBodyType };
    }
    if (opts.data !== undefined || fields.length > 0) throw new UsageError(`${op.group} ${op.name} takes no request body (no --data / -f)`);
    return {};
  }
  let data: unknown;
  if (opts.data !== undefined) {
    const { text, from } = await readData(ctx, opts.data);
    try {
      data = parseDocument(text, from);
    } catch (err) {
      throw new UsageError((err as Error).message);
    }
  }
  let body: unknown;
  try {
    body = buildBody(op.body, { data, fields, readFile: (p) => readFileSync(resolve(ctx.io.cwd, p), 'utf8') });
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
  if (body === undefined) {
    const required = op.body.required ?? [];
    if (required.length > 0) {
      throw new RequestInvalidError([
        `this operation needs a body with at least: ${required.join(', ')}`,
        `give it with --data @file.json or -f key=value (template: agentctl ${op.group} ${op.name} --skeleton)`,
      ]);
    }
    body = {};
  }
  return { body };
}

function formatStreamMessage(message: unknown): { text: string; error?: boolean; note?: boolean } {
  if (typeof message === 'string') return { text: message };
  const m = (message ?? {}) as Record<string, unknown>;
  if (m.type === 'end') return { text: `-- end of stream${typeof m.reason === 'string' ? `: ${m.reason}` : ''}`, note: true };
  if (m.type === 'error') return { text: `${String(m.error ?? m.message ?? 'error')}${m.code ? ` (${String(m.code)})` : ''}`, error: true };
  if (typeof m.text === 'string' || typeof m.line === 'string') return { text: logLine(m) };
  if (typeof m.message === 'string') return { text: m.message };
  return { text: JSON.stringify(message) };
}

async function follow(ctx: CliContext, stream: Operation, params: Record<string, unknown>, query: Record<string, unknown>): Promise<void> {
  const client = ctx.client();
  const emit = await ctx.emitter();
  const controller = new AbortController();
  const stop = () => controller.abort();
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
  try {
    await client.follow(fillPath(stream, params), {
      query: query as Record<string, string>,
      signal: controller.signal,
      onReady: () =>
        ctx.io.stderr.write(ctx.err.dim(`following ${stream.path.replace(/\{(\w+)\}/g, (_m, n: string) => String(params[n]))} (Ctrl-C to stop)\n`)),
      onMessage: (message) => {
        if (emit) return emit(message);
        const { text, error, note } = formatStreamMessage(message);
        if (error) ctx.warn(ctx.err.red(text));
        else if (note) ctx.warn(ctx.err.dim(text));
        else ctx.print(text);
      },
    });
  } finally {
    process.removeListener('SIGINT', stop);
    process.removeListener('SIGTERM', stop);
  }
}

function printAnswer(ctx: CliContext, op: Operation, answer: Envelope, planned: boolean, followHint?: string): void {
  const { out } = ctx;
  if (planned && isPlan(answer.data)) return ctx.print(renderPlan(answer.data, out));
  if (op.id === 'plans.apply' && answer.data && typeof answer.data === 'object' && 'plan' in answer.data) {
    const applied = answer.data as PlanApplyResult;
    ctx.print(out.green(`Plan ${applied.plan.id} applied (${applied.plan.action}).`));
    if (applied.result !== null && applied.result !== undefined) ctx.print(renderData(applied.result, out, ctx.width));
    if (answer.message) ctx.print(out.dim(answer.message));
    if (followHint) ctx.print(out.dim(followHint));
    return;
  }
  if (isPlan(answer.data)) ctx.print(renderPlan(answer.data, out));
  else {
    const text = renderData(answer.data, out, ctx.width);
    if (text) ctx.print(text);
  }
  if (answer.meta && typeof answer.meta.total === 'number') {
    const n = Array.isArray(answer.data) ? answer.data.length : 0;
    ctx.print(
      out.dim(
        n === 0 ? `0 of ${answer.meta.total}` : `${answer.meta.offset + 1}-${answer.meta.offset + n} of ${answer.meta.total} (--limit / --offset for more)`,
      ),
    );
  }
  if (answer.message) ctx.print(out.dim(answer.message));
  if (followHint) ctx.print(out.dim(followHint));
}

/** `plans apply` of a plan that starts a job answers `{plan, result: {job_id}}`: the job and the operation planned. */
function startedJob(description: ApiDescription, op: Operation, data: unknown): { id: string; origin: Operation } | undefined {
  if (op.id === 'plans.apply' && data && typeof data === 'object' && 'plan' in data) {
    const applied = data as PlanApplyResult;
    const id = jobIdOf(applied.result);
    return id ? { id, origin: description.byId(applied.plan.action) ?? op } : undefined;
  }
  const id = jobIdOf(data);
  return id ? { id, origin: op } : undefined;
}

/** A JSON document answer (the API description) can be printed in any format; other downloads only as they are. */
const isJsonDocument = (op: Operation) => !!op.produces && /json/.test(op.produces);

export async function runOperation(
  ctx: CliContext,
  description: ApiDescription,
  op: Operation,
  args: (string | undefined)[],
  opts: OperationOptions,
  attributes: Map<string, string>,
): Promise<void> {
  // A wrong -o is said before anything is sent.
  const format = ctx.format;
  if (opts.skeleton) {
    if (!op.body) throw new UsageError(`${op.group} ${op.name} takes no request body, so there is no skeleton`);
    ctx.print(opts.yaml || format.kind === 'yaml' ? skeletonYaml(op.body, `${op.method} ${op.path} — ${op.summary}`) : skeletonJson(op.body));
    return;
  }
  if (opts.yaml) throw new UsageError('--yaml only applies to --skeleton (answers in YAML: -o yaml)');
  if (op.produces && !isJsonDocument(op) && format.kind !== 'table') {
    throw new UsageError(`${op.group} ${op.name} answers ${op.produces}, not data: -o does not apply (write it to a file with --output-file <file>)`);
  }
  const params: Record<string, unknown> = {};
  op.pathParams.forEach((p, i) => {
    if (args[i] !== undefined) params[p.name] = args[i];
  });
  const missing = op.pathParams.filter((p) => params[p.name] === undefined);
  if (missing.length > 0) throw new UsageError(`missing ${missing.map((p) => `<${p.name}>`).join(' ')}\nusage: ${operationUsage(op)}`);
  const query = collectQuery(op, opts, attributes);
  const jobFollow = opts.follow && isJobReader(op);
  const streamOp = op.websocket ? op : opts.follow && !jobFollow ? description.followStreamOf(op) : undefined;
  if (opts.follow && !streamOp && !jobFollow) throw new UsageError(`${op.group} ${op.name} cannot be followed`);
  if (opts.plan && !op.plan)
    throw new UsageError(`${op.group} ${op.name} does not support plans (the description does not mark it x-plan); it runs immediately`);
  const { body, contentType } = await requestBody(ctx, op, opts);
  const problems = validateParameters(streamOp ?? op, params, query);
  if (op.body) problems.push(...validateBody(op.body, body));
  if (problems.length > 0) throw new RequestInvalidError(problems);
  if (opts.plan) query.plan = true;
  const path = fillPath(streamOp ?? op, params);
  const client = ctx.client();

  if (opts.dryRun) {
    const url = client.urlFor(path, query as Record<string, string>);
    ctx.print(`${streamOp ? 'WEBSOCKET' : op.method} ${url}`);
    if (body !== undefined && !Buffer.isBuffer(body)) ctx.print(JSON.stringify(body, null, 2));
    ctx.warn(ctx.err.dim('dry run: the request is valid and was not sent'));
    return;
  }
  if (streamOp) return follow(ctx, streamOp, params, query);
  if (jobFollow) return followJob(ctx, description, String(params[op.pathParams[0]!.name]), { origin: op, reader: op });

  const res = await client.request<Envelope>(op.method, path, { query: query as Record<string, string>, body, contentType });
  if (res.raw !== undefined || op.produces) {
    if (opts.outputFile || format.kind === 'table' || res.raw !== undefined) {
      const bytes = res.raw ?? Buffer.from(JSON.stringify(res.json, null, 2) + '\n');
      if (opts.outputFile) {
        writeFileSync(resolve(ctx.io.cwd, opts.outputFile), bytes);
        ctx.warn(`wrote ${bytes.length} bytes to ${opts.outputFile}`);
      } else ctx.io.stdout.write(bytes);
      return;
    }
    return ctx.emit(res.json, () => undefined);
  }
  const answer = res.json ?? { data: null };
  const job = !opts.plan ? startedJob(description, op, answer.data) : undefined;
  if (job && !opts.detach) {
    if (format.kind === 'table') printAnswer(ctx, op, answer, false);
    ctx.warn(ctx.err.dim(`Following job ${job.id} until it ends (Ctrl-C stops following; the job goes on).`));
    return followJob(ctx, description, job.id, { origin: job.origin });
  }
  const reader = job ? readersFor(description, job.origin)[0] : undefined;
  const hint = job && reader ? `The job goes on in the agent. Follow it: agentctl ${reader.group} ${reader.name} ${job.id} --follow` : undefined;
  await ctx.emit(answer, () => printAnswer(ctx, op, answer, !!opts.plan, hint));
}

/** The `agentctl <group>` command with one subcommand per operation. */
export function groupCommand(
  ctx: CliContext,
  description: ApiDescription,
  group: { name: string; description?: string; operations: Operation[] },
  run: (fn: () => Promise<void>, op?: Operation) => Promise<void>,
  wanted?: Operation,
): Command {
  const cmd = new Command(group.name).description(group.description ?? `${group.operations.length} operation${group.operations.length === 1 ? '' : 's'}`);
  cmd.configureHelp({
    formatHelp: () => {
      const rows: [string, string][] = group.operations.map((op) => [
        `${op.name}${op.pathParams.map((p) => ` <${p.name}>`).join('')}`,
        `${op.summary}${op.plan ? ctx.out.dim(' [plan]') : ''}${ctx.out.dim(`  (${op.websocket ? 'WS' : op.method} ${op.path})`)}`,
      ]);
      return [
        `${ctx.out.bold(`agentctl ${group.name}`)}${group.description ? ` — ${group.description}` : ''}`,
        '',
        ctx.out.bold('Operations'),
        twoColumns(rows),
        '',
        `Help on one operation: agentctl ${group.name} <operation> --help`,
        '',
      ].join('\n');
    },
  });
  for (const op of group.operations) {
    cmd.addCommand(!wanted || op === wanted ? operationCommand(ctx, description, op, run) : new Command(op.name).description(op.summary));
  }
  return cmd;
}

function operationCommand(
  ctx: CliContext,
  description: ApiDescription,
  op: Operation,
  run: (fn: () => Promise<void>, op?: Operation) => Promise<void>,
): Command {
  const cmd = new Command(op.name).description(op.summary).allowExcessArguments(false);
  // `securityEventsGet` (as in the operationId) works as well as `security-events-get`.
  const camel = op.id.slice(op.id.indexOf('.') + 1);
  if (camel !== op.name && /^[A-Za-z][A-Za-z0-9]*$/.test(camel)) cmd.alias(camel);
  for (const p of op.pathParams) cmd.argument(`[${p.name}]`, p.description ?? p.name);
  const attributes = new Map<string, string>();
  for (const p of op.queryParams) {
    const name = kebab(p.name);
    if (RESERVED.has(name) || !/^[a-z][a-z0-9-]*$/.test(name)) continue;
    const option = isBooleanParam(p)
      ? new Option(`--${name} [bool]`, p.description ?? '').argParser((v) => (v === 'false' || v === '0' ? false : v === 'true' || v === '1' ? true : v))
      : isArrayParam(p)
        ? new Option(`--${name} <value>`, p.description ?? '').argParser(collect)
        : new Option(`--${name} <value>`, p.description ?? '');
    attributes.set(option.attributeName(), p.name);
    cmd.addOption(option);
  }
  // Top-level body fields of one value (string, number, boolean) are options too: `--strategy start-first` is
  // `-f strategy=start-first` (typed the same way). Not a name the CLI or a query parameter already takes.
  const bodyOptions = new Map<string, string>();
  const taken = new Set([...op.queryParams.map((p) => kebab(p.name)), 'q', 'd', 'f']);
  for (const [name, schema] of Object.entries(op.body?.properties ?? {})) {
    const flag = kebab(name);
    const types = [...acceptedTypes(schema)].filter((t) => t !== 'null');
    if (RESERVED.has(flag) || taken.has(flag) || !/^[a-z][a-z0-9-]*$/.test(flag)) continue;
    if (!types.length || !types.every((t) => ['string', 'number', 'integer', 'boolean'].includes(t))) continue;
    const option = types.every((t) => t === 'boolean') ? new Option(`--${flag} [bool]`).preset('true') : new Option(`--${flag} <value>`);
    bodyOptions.set(option.attributeName(), name);
    cmd.addOption(option.hideHelp());
  }
  // Body fields the description marks for the command line: `deployments create NAME --set KEY=VALUE`.
  const { bodyArguments, setField } = cliFields(op);
  for (const name of bodyArguments) cmd.argument(`[${name}]`, `the body's ${name}`);
  const setOption = setField && !taken.has('set') && ![...bodyOptions.values()].some((n) => kebab(n) === 'set');
  if (setOption) cmd.option('--set <key=value>', `an entry of ${setField} (repeatable)`, collect);
  cmd.option('-q, --query <key=value>', 'query parameter', collect);
  if (op.body || op.rawBodyType) cmd.option('-d, --data <source>', 'body: @file, - or inline JSON');
  if (op.body) {
    cmd.option('-f, --field <key=value>', 'body field', collect);
    cmd.option('--skeleton', 'print a fillable body');
    cmd.option('--yaml', 'skeleton as YAML');
  }
  // Accepted everywhere so that misuse gets an explanation rather than "unknown option".
  cmd.addOption(op.plan ? new Option('--plan', 'preview as a plan') : new Option('--plan').hideHelp());
  const followable = description.followStreamOf(op) ? 'follow new entries' : isJobReader(op) ? 'follow the job until it ends' : undefined;
  cmd.addOption(followable ? new Option('--follow', followable) : new Option('--follow').hideHelp());
  if (startsJob(op) || op.id === 'plans.apply') cmd.option('--detach', 'answer once the job is started, without following it');
  if (op.produces) cmd.option('--output-file <file>', 'write the answer to a file');
  cmd.option('--dry-run', 'check and print the request without sending it');
  cmd.configureHelp({ formatHelp: () => operationHelp(op, description, ctx.out) });
  cmd.action((...received: unknown[]) => {
    const args = received.slice(0, op.pathParams.length) as (string | undefined)[];
    const positional = received.slice(op.pathParams.length, op.pathParams.length + bodyArguments.length) as (string | undefined)[];
    const opts = received[op.pathParams.length + bodyArguments.length] as OperationOptions;
    for (const [attribute, name] of bodyOptions) {
      const value = opts[attribute];
      if (value !== undefined) opts.field = [...(opts.field ?? []), `${name}=${String(value)}`];
    }
    return run(async () => {
      // As -f assignments, so that a body from --data is completed the same way; a value is never a file to read
      // (`@@` is -f's literal `@`): `--set PASSWORD=@secret` sets that text.
      const literal = (value: string) => (value.startsWith('@') ? `@${value}` : value);
      bodyArguments.forEach((name, i) => {
        if (positional[i] !== undefined) opts.field = [...(opts.field ?? []), `${name}=${literal(positional[i])}`];
      });
      for (const entry of setOption ? ((opts.set as string[] | undefined) ?? []) : []) {
        const eq = entry.indexOf('=');
        if (eq <= 0 || /[.[\]]/.test(entry.slice(0, eq))) throw new UsageError(`--set ${entry}: expected KEY=VALUE`);
        opts.field = [...(opts.field ?? []), `${setField}.${entry.slice(0, eq)}=${literal(entry.slice(eq + 1))}`];
      }
      await runOperation(ctx, description, op, args, opts, attributes);
    }, op);
  });
  return cmd;
}
