/** Per-operation help, generated from the live description: what it does, who may call it, every input. */
import { constraints, enumValues, isJobReader, listFields, nonNull, startsJob, typeLabel, type ApiDescription, type Operation } from '@agent/client';
import type { Style } from './style.js';
import { twoColumns } from './render.js';
import { cliFields, optionFlagFor } from './operation-options.js';

const show = (v: unknown) => (typeof v === 'string' ? v : JSON.stringify(v));

function paramLine(p: Operation['pathParams'][number], flag: string): [string, string] {
  const details: string[] = [typeLabel(p.schema)];
  if (p.required) details.push('required');
  const choices = enumValues(nonNull(p.schema));
  if (choices) details.push(`one of: ${choices.map(show).join(', ')}`);
  if ('default' in p.schema) details.push(`default ${show(p.schema.default)}`);
  details.push(...constraints(p.schema));
  return [flag, `${p.description ? `${p.description} — ` : ''}${details.join(', ')}`];
}

export function operationUsage(op: Operation): string {
  const args = [...op.pathParams.map((p) => p.name), ...cliFields(op).bodyArguments].map((name) => `<${name}>`).join(' ');
  return `agentctl ${op.group} ${op.name}${args ? ` ${args}` : ''} [options]`;
}

export function operationHelp(op: Operation, description: ApiDescription, style: Style): string {
  const out: string[] = [];
  const h = (title: string) => out.push('', style.bold(title));
  out.push(`${style.bold(`agentctl ${op.group} ${op.name}`)} — ${op.summary || op.id}`);
  if (op.description) out.push('', ...op.description.split('\n').map((l) => `  ${l}`));
  h('Request');
  const rows: [string, string][] = [
    ['Method and path', `${op.websocket ? 'WebSocket (GET)' : op.method} ${op.path}`],
    ['Operation id', op.id],
    ['Permission', op.permission === 'public' ? 'none (public)' : op.permission === 'authenticated' ? 'any logged-in user' : op.permission],
    ['Plan', op.plan ? 'supported: --plan previews the change, `agentctl plans apply <id>` runs it' : 'not supported (runs immediately)'],
  ];
  if (op.deploymentScoped) rows.push(['Deployment', 'scoped: needs access to the deployment']);
  if (op.produces) rows.push(['Answer', `${op.produces} (written to stdout, or --output-file <file>)`]);
  if (startsJob(op)) rows.push(['Job', 'starts a background job, followed until it ends unless --detach']);
  out.push(twoColumns(rows));
  h('Usage');
  out.push(`  ${operationUsage(op)}`);

  h('Path arguments');
  out.push(op.pathParams.length ? twoColumns(op.pathParams.map((p) => paramLine(p, `<${p.name}>`))) : '  (none)');

  h('Query parameters');
  out.push(op.queryParams.length ? twoColumns(op.queryParams.map((p) => paramLine(p, optionFlagFor(p)))) : '  (none)');

  if (op.body) {
    h('Body fields (JSON: --data @file.json | --data - | -f key=value; --skeleton prints a template)');
    const fields = listFields(op.body);
    if (fields.length === 0) out.push('  (none: send {})');
    const table: [string, string][] = [];
    for (const f of fields) {
      const details: string[] = [f.type, f.required ? style.yellow('required') : 'optional'];
      if (f.enum) details.push(`one of: ${f.enum.map(show).join(', ')}`);
      if (f.hasDefault) details.push(`default ${JSON.stringify(f.default)}`);
      details.push(...f.constraints);
      table.push([`${'  '.repeat(f.depth)}${f.path.split('.').pop()}`, `${details.join(', ')}${f.description ? ` — ${f.description}` : ''}`]);
    }
    if (table.length) out.push(twoColumns(table));
  } else if (op.rawBodyType) {
    h('Body');
    out.push(`  raw ${op.rawBodyType}: --data @file`);
  }

  h('Options');
  const opts: [string, string][] = [];
  if (op.body) {
    opts.push(['-d, --data <@file|-|json>', 'the body: a JSON (or YAML) file, - for stdin, or inline JSON']);
    opts.push(['-f, --field <key=value>', 'set a body field (repeatable): dotted keys for nested fields, JSON-looking values parsed, key=@file reads a file']);
    opts.push(['--<field> <value>', 'a top-level body field of one value (string, number, boolean) by its name: the same as -f <field>=<value>']);
    const { bodyArguments, setField } = cliFields(op);
    for (const name of bodyArguments) opts.push([`<${name}>`, `the body's ${name} (after the path arguments): the same as -f ${name}=<value>`]);
    if (setField) opts.push(['--set <key=value>', `an entry of ${setField} (repeatable): the same as -f ${setField}.<key>=<value>`]);
    opts.push(['--skeleton', 'print a fillable body with every field and exit (add --yaml for YAML)']);
  }
  opts.push(['-q, --query <key=value>', 'any query parameter (repeatable)']);
  if (op.plan) opts.push(['--plan', 'preview: send plan=true and print the plan instead of changing anything']);
  if (description.followStreamOf(op)) opts.push(['--follow', 'keep following new entries (websocket)']);
  if (isJobReader(op)) opts.push(['--follow', 'follow the job until it ends: its output, progress with ETA (Ctrl-C stops following, not the job)']);
  if (startsJob(op)) opts.push(['--detach', 'answer once the job is started; without it the job is followed until it ends (output, progress, ETA)']);
  if (op.produces) opts.push(['--output-file <file>', 'write the answer to a file']);
  opts.push(['--dry-run', 'check the request and print it without sending']);
  opts.push(['-o, --output <format>', 'table (default), json, yaml, or jsonpath=<expr> over the answer as -o json prints it']);
  opts.push(['--json', 'the same as -o json']);
  opts.push(['-h, --help', 'this help']);
  out.push(twoColumns(opts));
  out.push('', style.dim('Global: --profile <name>, --url <url>, --token <token>, --refresh (download the description again), --no-color'));
  return out.join('\n') + '\n';
}
