/**
 * The compose file as written, before compose sees it: YAML syntax and structure (with line and column), and the
 * few keys that make compose itself read host files while it builds its model. `include`, `extends.file` and
 * `label_file` are refused; `env_file` entries are read by the agent (inside the folder, never through a symlink)
 * and handed to compose as private copies, so compose reads no file a container could swap.
 */
import { createHash } from 'node:crypto';
import { isAbsolute, resolve } from 'node:path';
import { isAlias, isMap, isPair, isScalar, isSeq, LineCounter, parseDocument, visit, type Document, type Node } from 'yaml';
import { errors, HttpError, isInside, readTextInside } from '@agent/sdk';
import { interpolateString } from './interpolate.js';
import { isClassifiedKey, type ModelNode } from './policy.js';

const SERVICE_NAME = /^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,62}$/;

export interface SourceInput {
  project: string;
  dir: string;
  content: string;
  env: Record<string, string>;
  /** false when the policy is off: file-reading keys are reported, not refused. */
  enforce: boolean;
  /** The private folder env file copies are written to (absolute): the rewritten text points there. */
  envDir: string;
  /** Files about to be written (relative path → text), used instead of the disk. */
  files?: Record<string, string>;
  /** Compose v1 does not know the top-level `name`: a correct one is taken out of its copy (`-p` names the project). */
  dropName?: boolean;
}

export interface EnvCopy {
  /** As written in the compose file (after interpolation), for messages. */
  written: string;
  /** Content-addressed name of the private copy. */
  name: string;
  content: string;
}

export interface PreparedSource {
  /** The compose text handed to compose: the original with `env_file` values replaced by private copies. */
  text: string;
  envCopies: EnvCopy[];
  /** Every variable name an `environment` section of the file sets (to spot environment compose read elsewhere). */
  environmentKeys: Set<string>;
  /** Build contexts as written (interpolated), relative to the project folder or absolute. */
  buildContexts: string[];
  /** Where keys are in the original text, for messages: `(line L, column C)` or ''. */
  position(path: (string | number)[]): string;
  /** Policy findings when the policy is off (they would have been refused). */
  findings: { key: string; value: string; why: string }[];
}

const invalid = (message: string, extra: Record<string, unknown> = {}) => errors.badRequest(message, 'INVALID_COMPOSE', { field: 'compose_content', ...extra });

const refuse = (key: string, value: string, why: string, exception: string | null, service: string | null = null) =>
  errors.badRequest(
    `${service ? `service '${service}': ` : ''}${key}: ${why} (refused by the host-safety policy${exception ? `; an admin may grant the exception '${exception}'` : ''})`,
    'HOST_SAFETY',
    {
      service,
      key,
      value,
      exception,
      violations: [{ service, key, value, exception, why }],
    },
  );

function positionIn(doc: Document, counter: LineCounter, path: (string | number)[]): string {
  for (let i = path.length; i > 0; i--) {
    const parent = i === 1 ? doc.contents : doc.getIn(path.slice(0, i - 1), true);
    if (!isMap(parent)) continue;
    const pair = parent.items.find((p) => isScalar(p.key) && p.key.value === path[i - 1]);
    const range = (pair?.key as { range?: [number, number, number] } | undefined)?.range;
    if (range) {
      const { line, col } = counter.linePos(range[0]);
      return ` (line ${line}, column ${col})`;
    }
  }
  return '';
}

/** Names of the variables an env file sets (generous: anything before `=`, so no name compose reads is missed). */
export function envFileKeys(text: string): string[] {
  const keys: string[] = [];
  for (const raw of text.split(/\r?\n/)) {
    const line = raw.trim();
    if (!line || line.startsWith('#')) continue;
    const body = line.replace(/^export\s+/, '');
    const eq = body.indexOf('=');
    keys.push((eq === -1 ? body : body.slice(0, eq)).trim());
  }
  return keys;
}

/** Collects every key of every `environment` mapping or list in the resolved document. */
function environmentKeysOf(value: unknown, out: Set<string>): void {
  if (Array.isArray(value)) {
    for (const v of value) environmentKeysOf(v, out);
    return;
  }
  if (!value || typeof value !== 'object') return;
  for (const [k, v] of Object.entries(value)) {
    if (k === 'environment') {
      if (Array.isArray(v)) for (const item of v) out.add(String(item).split('=')[0]!.trim());
      else if (v && typeof v === 'object') for (const key of Object.keys(v)) out.add(key);
    }
    environmentKeysOf(v, out);
  }
}

/** One entry of an `env_file` value: a path, or `{path, required, format}`. */
interface EnvFileEntry {
  path: string;
  extra: Record<string, unknown>;
}

function envFileEntries(node: Node, service: string | null): EnvFileEntry[] {
  const bad = () =>
    invalid(`compose_content: ${service ? `service '${service}': ` : ''}env_file must be a path or a list of paths written out (no aliases)`, {
      key: 'env_file',
    });
  const entry = (n: unknown): EnvFileEntry => {
    if (isScalar(n) && typeof n.value === 'string') return { path: n.value, extra: {} };
    if (isMap(n)) {
      const js = n.toJSON() as Record<string, unknown>;
      if (typeof js.path !== 'string') throw bad();
      const { path, ...extra } = js;
      return { path, extra };
    }
    throw bad();
  };
  if (isSeq(node)) return node.items.map(entry);
  return [entry(node)];
}

/**
 * Checks the text and prepares what compose reads. Throws 400 INVALID_YAML / INVALID_COMPOSE / HOST_SAFETY
 * (file-reading keys) and 409 UNSAFE_FILE is mapped to HOST_SAFETY for env files.
 */
/** Larger compose files are refused before they are parsed (real ones are a few KiB). */
export const MAX_COMPOSE_BYTES = 1024 * 1024;

export async function prepareSource(input: SourceInput): Promise<PreparedSource> {
  if (Buffer.byteLength(input.content) > MAX_COMPOSE_BYTES)
    throw errors.badRequest(`compose_content: the file is larger than ${MAX_COMPOSE_BYTES} bytes`, 'COMPOSE_TOO_LARGE', { field: 'compose_content' });
  const counter = new LineCounter();
  let doc: Document;
  try {
    doc = parseDocument(input.content, { lineCounter: counter, prettyErrors: true, uniqueKeys: true, merge: true });
  } catch (err) {
    // Nesting deep enough to exhaust the parser's stack is not a compose file.
    throw errors.badRequest(`compose_content: invalid YAML: ${(err as Error).message.split('\n')[0]}`, 'INVALID_YAML', { field: 'compose_content' });
  }
  if (doc.errors.length) {
    const e = doc.errors[0]!;
    const pos = e.linePos?.[0];
    throw errors.badRequest(
      `compose_content: invalid YAML${pos ? ` at line ${pos.line}, column ${pos.col}` : ''}: ${e.message.split('\n')[0]}`,
      'INVALID_YAML',
      {
        field: 'compose_content',
        line: pos?.line ?? null,
        column: pos?.col ?? null,
      },
    );
  }
  if (!isMap(doc.contents)) throw invalid('compose_content: the file must be a mapping with a `services` key');
  const at = (path: (string | number)[]) => positionIn(doc, counter, path);
  let parsed: ModelNode;
  try {
    parsed = doc.toJS({ maxAliasCount: 100 }) as ModelNode;
  } catch (err) {
    // The yaml library refuses alias chains that would expand beyond reason ("billion laughs").
    throw errors.badRequest(`compose_content: invalid YAML: ${(err as Error).message.split('\n')[0]}`, 'INVALID_YAML', { field: 'compose_content' });
  }
  const findings: PreparedSource['findings'] = [];
  const fileRead = (key: string, value: string, why: string, service: string | null = null) => {
    if (!input.enforce) return void findings.push({ key, value, why });
    throw refuse(key, value, why, null, service);
  };

  for (const key of Object.keys(parsed)) {
    if (key.startsWith('x-')) continue;
    if (key === 'include') fileRead('include', JSON.stringify(parsed.include), 'pulling in other files is not allowed');
    else if (!isClassifiedKey('top', key) && input.enforce) throw invalid(`compose_content: unknown top-level key '${key}'${at([key])}`, { key });
  }
  if (parsed.name !== undefined && parsed.name !== input.project) {
    throw invalid(`compose_content: 'name' must be the project name ('${input.project}') or absent${at(['name'])}`, { key: 'name' });
  }
  const services = parsed.services;
  if (services === undefined || services === null || typeof services !== 'object' || Array.isArray(services) || Object.keys(services).length === 0) {
    throw invalid(`compose_content: 'services' must be a mapping with at least one service${at(['services'])}`, { key: 'services' });
  }
  for (const [name, svc] of Object.entries(services as ModelNode)) {
    if (!SERVICE_NAME.test(name)) throw invalid(`compose_content: invalid service name '${name}'${at(['services', name])}`, { service: name });
    if (!svc || typeof svc !== 'object' || Array.isArray(svc))
      throw invalid(`compose_content: service '${name}' must be a mapping${at(['services', name])}`, { service: name });
    for (const key of Object.keys(svc)) {
      if (!key.startsWith('x-') && !isClassifiedKey('service', key) && input.enforce) {
        throw invalid(`compose_content: service '${name}': unknown key '${key}'${at(['services', name, key])}`, { service: name, key });
      }
    }
    if (svc.image === undefined && svc.build === undefined && svc.extends === undefined) {
      throw invalid(`compose_content: service '${name}' needs an 'image' or a 'build'${at(['services', name])}`, { service: name, key: 'image' });
    }
    if (svc.image !== undefined && (typeof svc.image !== 'string' || !svc.image.trim())) {
      throw invalid(`compose_content: service '${name}': 'image' must be a non-empty string${at(['services', name, 'image'])}`, {
        service: name,
        key: 'image',
      });
    }
  }

  // Keys that make compose read files, wherever they are (service, x- block, anchor): found in the syntax tree.
  const replacements: { start: number; end: number; entries?: EnvFileEntry[]; text?: string; service?: string | null }[] = [];
  let failure: HttpError | null = null;
  visit(doc, {
    Pair(_key, pair, path) {
      if (failure || !isPair(pair) || !isScalar(pair.key)) return;
      const key = pair.key.value;
      const service = serviceOf(path);
      try {
        if (key === 'label_file')
          fileRead('label_file', String((pair.value as Node | null)?.toJSON?.() ?? ''), 'reading labels from a file is not allowed', service);
        if (key === 'extends') {
          const value = isAlias(pair.value) ? pair.value.resolve(doc) : pair.value;
          if (isMap(value) && value.has('file'))
            fileRead('extends.file', String(value.get('file')), 'extending a service of another file is not allowed', service);
        }
        if (key === 'env_file' && pair.value) {
          if (isAlias(pair.value))
            throw invalid(`compose_content: ${service ? `service '${service}': ` : ''}env_file must be written out (no aliases)`, { key: 'env_file' });
          const node = pair.value as Node;
          const range = node.range;
          if (!range) return;
          replacements.push({ start: range[0], end: range[1], entries: envFileEntries(node, service), service });
        }
      } catch (err) {
        failure = err as HttpError;
      }
    },
  });
  if (failure) throw failure;

  if (input.dropName && parsed.name !== undefined && isMap(doc.contents)) {
    const pair = doc.contents.items.find((p) => isScalar(p.key) && p.key.value === 'name');
    const start = (pair?.key as Node | undefined)?.range?.[0];
    const end = (pair?.value as Node | undefined)?.range?.[1];
    if (start !== undefined && end !== undefined) replacements.push({ start, end, text: `x-agent-name: ${JSON.stringify(parsed.name)}` });
  }

  const envCopies: EnvCopy[] = [];
  let text = input.content;
  for (const r of replacements.sort((a, b) => b.start - a.start)) {
    if (r.text !== undefined) {
      text = text.slice(0, r.start) + r.text + text.slice(r.end);
      continue;
    }
    const items: unknown[] = [];
    for (const entry of r.entries ?? []) {
      const written = interpolateString(entry.path, input.env);
      const abs = isAbsolute(written) ? resolve(written) : resolve(input.dir, written);
      if (!isInside(resolve(input.dir), abs)) {
        if (!input.enforce) {
          findings.push({ key: 'env_file', value: written, why: 'outside the deployment folder' });
          items.push(Object.keys(entry.extra).length ? { ...entry.extra, path: abs } : abs);
          continue;
        }
        throw refuse('env_file', written, `'${written}' is outside the deployment folder`, null, r.service ?? null);
      }
      let content: string | null;
      const pending = pendingFile(input, abs);
      try {
        content = pending ?? (await readTextInside(input.dir, abs));
      } catch (err) {
        if (err instanceof HttpError) throw refuse('env_file', written, err.message, null, r.service ?? null);
        throw err;
      }
      // A missing file stays missing for compose (it decides whether `required: false` makes that fine).
      const name = content === null ? `missing-${sha(abs).slice(0, 16)}.env` : `${sha(content).slice(0, 32)}.env`;
      if (content !== null) envCopies.push({ written, name, content });
      const path = `${input.envDir}/${name}`;
      items.push(Object.keys(entry.extra).length ? { ...entry.extra, path } : path);
    }
    text = text.slice(0, r.start) + JSON.stringify(items) + text.slice(r.end);
  }

  const environmentKeys = new Set<string>();
  environmentKeysOf(parsed, environmentKeys);
  const buildContexts: string[] = [];
  for (const svc of Object.values(services as ModelNode)) {
    const build = svc?.build;
    const context = typeof build === 'string' ? build : build && typeof build === 'object' ? (build.context ?? '.') : null;
    if (typeof context === 'string') buildContexts.push(interpolateString(context, input.env));
  }
  return { text, envCopies, environmentKeys, buildContexts, position: at, findings };
}

/** A file the caller is about to write, by its absolute path inside the folder. */
function pendingFile(input: SourceInput, abs: string): string | null {
  for (const [rel, text] of Object.entries(input.files ?? {})) if (resolve(input.dir, rel) === abs) return text;
  return null;
}

/** The service a syntax-tree path is in (`services.<name>....`), if any. */
function serviceOf(path: readonly unknown[]): string | null {
  // path alternates collections and pairs: [Document, Map(root), Pair(services), Map, Pair(<name>), ...]
  const pairs = path.filter(isPair);
  if (pairs.length >= 2 && isScalar(pairs[0]!.key) && pairs[0]!.key.value === 'services' && isScalar(pairs[1]!.key)) return String(pairs[1]!.key.value);
  return null;
}

const sha = (text: string) => createHash('sha256').update(text).digest('hex');
