/**
 * Templates: one folder per template with a compose file and `template.json`. Loaded at start and on refresh;
 * an invalid template is reported (folder and reason) and skipped, never fatal.
 */
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { readCompose } from './compose-check.js';
import { findComposeFile, type LogSourceSpec } from './files.js';
import { relativePathProblem, SOURCE_ID } from './log-sources.js';
import { ENV_KEY } from './env-file.js';

/** Templates ship with the agent (or come from an admin's folder): plain reads; a missing file reads as null. */
const readText = (path: string): Promise<string | null> =>
  readFile(path, 'utf8').catch((err: NodeJS.ErrnoException) => {
    if (err.code === 'ENOENT') return null;
    throw err;
  });

export const TEMPLATE_ID = /^[a-z0-9][a-z0-9_-]{0,62}$/;

export interface TemplateEnv {
  key: string;
  description: string;
  default: string;
  secret: boolean;
  required: boolean;
}

export interface Template {
  id: string;
  name: string;
  description: string;
  category: string;
  tags: string[];
  env: TemplateEnv[];
  default_port: number | null;
  services: string[];
  images: string[];
  log_sources: LogSourceSpec[];
  compose_file: string;
}

export interface InvalidTemplate {
  folder: string;
  error: string;
}

const isStr = (v: unknown): v is string => typeof v === 'string';

function check(folder: string, raw: any, composeText: string, composeFile: string): Template {
  const fail = (msg: string): never => {
    throw new Error(`template.json: ${msg}`);
  };
  if (!raw || typeof raw !== 'object' || Array.isArray(raw)) fail('must be an object');
  if (raw.id !== folder) fail(`id must equal the folder name '${folder}'`);
  for (const key of ['name', 'description', 'category']) if (!isStr(raw[key]) || !raw[key].trim()) fail(`'${key}' must be a non-empty string`);
  if (!/^[a-z0-9][a-z0-9 _-]{0,39}$/.test(raw.category)) fail("'category' must be lower-case words");
  const tags = raw.tags ?? [];
  if (!Array.isArray(tags) || !tags.every(isStr)) fail("'tags' must be a list of strings");
  const env: TemplateEnv[] = [];
  for (const [i, v] of (Array.isArray(raw.env) ? raw.env : raw.env === undefined ? [] : fail("'env' must be a list")).entries()) {
    if (!v || !isStr(v.key) || !new RegExp(ENV_KEY).test(v.key)) fail(`env[${i}].key is missing or invalid`);
    if (v.default !== undefined && !isStr(v.default)) fail(`env[${i}].default must be a string`);
    env.push({
      key: v.key,
      description: isStr(v.description) ? v.description : '',
      default: v.default ?? '',
      secret: v.secret === true,
      required: v.required === true,
    });
  }
  const port = raw.default_port ?? null;
  if (port !== null && (!Number.isInteger(port) || port < 1 || port > 65535)) fail("'default_port' must be a port number or null");
  const logSources: LogSourceSpec[] = [];
  for (const [i, s] of (Array.isArray(raw.log_sources) ? raw.log_sources : []).entries()) {
    if (!s || !isStr(s.id) || !new RegExp(SOURCE_ID).test(s.id) || s.id === 'stdout') fail(`log_sources[${i}].id is invalid`);
    if (!isStr(s.name) || !isStr(s.path) || relativePathProblem(s.path)) fail(`log_sources[${i}] needs a name and a relative path`);
    logSources.push({ id: s.id, name: s.name, path: s.path, ...(isStr(s.format) ? { format: s.format } : {}) });
  }
  let parsed;
  try {
    parsed = readCompose(composeText);
  } catch (err) {
    throw new Error(`${composeFile}: ${(err as Error).message}`);
  }
  const images = [
    ...new Set(
      Object.values(parsed.parsed.services as Record<string, any>)
        .map((s) => s?.image)
        .filter(isStr),
    ),
  ];
  return {
    id: folder,
    name: raw.name,
    description: raw.description,
    category: raw.category,
    tags,
    env,
    default_port: port,
    services: parsed.services,
    images,
    log_sources: logSources,
    compose_file: composeFile,
  };
}

export class TemplateCatalog {
  private templates = new Map<string, Template>();
  private invalid: InvalidTemplate[] = [];

  private loading: Promise<unknown> = Promise.resolve();

  constructor(readonly dir: string) {}

  /** Waits for a load in progress (the first one runs in the background of the agent's start). */
  async ready(): Promise<void> {
    await this.loading.catch(() => undefined);
  }

  load(): Promise<{ count: number; invalid: InvalidTemplate[] }> {
    const loading = this.read();
    this.loading = loading;
    return loading;
  }

  private async read(): Promise<{ count: number; invalid: InvalidTemplate[] }> {
    const next = new Map<string, Template>();
    const invalid: InvalidTemplate[] = [];
    let folders: string[] = [];
    try {
      folders = (await readdir(this.dir, { withFileTypes: true }))
        .filter((d) => d.isDirectory())
        .map((d) => d.name)
        .sort();
    } catch (err) {
      invalid.push({ folder: this.dir, error: `cannot read the templates folder: ${(err as NodeJS.ErrnoException).code ?? String(err)}` });
    }
    for (const folder of folders) {
      try {
        if (!TEMPLATE_ID.test(folder)) throw new Error('folder name is not a valid template id');
        const dir = join(this.dir, folder);
        const metaText = await readText(join(dir, 'template.json'));
        if (metaText === null) throw new Error('template.json is missing');
        let raw: unknown;
        try {
          raw = JSON.parse(metaText);
        } catch (err) {
          throw new Error(`template.json is not valid JSON: ${(err as Error).message}`);
        }
        const composeFile = findComposeFile(dir);
        if (!composeFile) throw new Error('compose file is missing');
        next.set(folder, check(folder, raw, (await readText(join(dir, composeFile))) ?? '', composeFile));
      } catch (err) {
        invalid.push({ folder, error: (err as Error).message });
      }
    }
    this.templates = next;
    this.invalid = invalid;
    return { count: next.size, invalid };
  }

  list(): Template[] {
    return [...this.templates.values()];
  }

  get(id: string): Template | undefined {
    return this.templates.get(id);
  }

  problems(): InvalidTemplate[] {
    return this.invalid;
  }

  async compose(id: string): Promise<string> {
    const t = this.templates.get(id);
    return t ? ((await readText(join(this.dir, id, t.compose_file))) ?? '') : '';
  }
}
