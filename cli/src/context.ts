/** What every command needs: global options, the resolved connection, a client and the agent's description. */
import {
  AgentClient,
  AgentConnectionError,
  ApiDescription,
  DescriptionCache,
  ProfileStore,
  loadDescription,
  resolveConnection,
  type Connection,
  type LoadedDescription,
} from '@agent/client';
import type { CliIO } from './io.js';
import { formatDocument, loadFormatters, parseOutputFormat, type OutputFormat } from './output.js';
import { colorWanted, makeStyle, type Style } from './style.js';
import { UsageError } from './usage-error.js';

export interface GlobalOptions {
  profile?: string;
  url?: string;
  token?: string;
  /** `-o`: table, json, yaml or jsonpath=<expr>. */
  output?: string;
  /** `--json`: the same as `-o json`. */
  json?: boolean;
  refresh?: boolean;
  color?: boolean;
}

export { UsageError };

export class CliContext {
  readonly store: ProfileStore;
  readonly cache: DescriptionCache;
  readonly out: Style;
  readonly err: Style;
  private conn?: Connection;
  private loaded?: LoadedDescription;
  private chosenFormat?: OutputFormat;

  constructor(
    readonly io: CliIO,
    readonly globals: GlobalOptions,
    readonly version: string,
  ) {
    this.store = new ProfileStore(io.env);
    this.cache = new DescriptionCache(io.env);
    this.out = makeStyle(colorWanted(io.stdout, globals.color, io.env));
    this.err = makeStyle(colorWanted(io.stderr, globals.color, io.env));
  }

  connection(): Connection {
    if (!this.conn) {
      try {
        this.conn = resolveConnection({ profile: this.globals.profile, url: this.globals.url, token: this.globals.token, env: this.io.env, store: this.store });
      } catch (err) {
        throw new UsageError((err as Error).message);
      }
    }
    return this.conn;
  }

  /** A client for the resolved agent; fails with a hint when no agent is configured. */
  client(): AgentClient {
    const c = this.connection();
    if (!c.url) {
      throw new UsageError('no agent configured: log in with `agentctl login --url https://agent.example.com`, or pass --url / set AGENTCTL_URL');
    }
    // Some operations run long (a deployment starting, an apply): 5 minutes unless AGENTCTL_TIMEOUT (seconds) says otherwise.
    const timeout = Number(this.io.env.AGENTCTL_TIMEOUT);
    return new AgentClient({ url: c.url, token: c.token, userAgent: `agentctl/${this.version}`, timeoutMs: timeout > 0 ? timeout * 1000 : 300_000 });
  }

  /** The description: cached per agent URL and version, downloaded when missing, stale or `refresh`. */
  async description(refresh = false): Promise<LoadedDescription> {
    if (this.loaded && (!refresh || this.loaded.fresh)) return this.loaded;
    const ttl = Number(this.io.env.AGENTCTL_DESCRIPTION_TTL);
    const client = this.client();
    try {
      this.loaded = await loadDescription(client, {
        cache: this.cache,
        refresh: refresh || !!this.globals.refresh,
        maxAgeMs: Number.isFinite(ttl) && this.io.env.AGENTCTL_DESCRIPTION_TTL ? ttl * 1000 : undefined,
      });
    } catch (err) {
      // Unreachable agent: help, skeletons and --dry-run still work from the last copy seen.
      const cached = err instanceof AgentConnectionError ? this.cache.latest(client.url) : undefined;
      if (!cached) throw err;
      this.warn(this.err.yellow(`warning: ${(err as Error).message}; using its description cached at ${cached.fetched_at} (version ${cached.version})`));
      this.loaded = { description: new ApiDescription(cached.document), fresh: true, version: cached.version };
    }
    return this.loaded;
  }

  /** The output format of `-o` / `--json`; `table` (for people) unless told. */
  get format(): OutputFormat {
    if (!this.chosenFormat) {
      const { output, json } = this.globals;
      const format: OutputFormat = output !== undefined ? parseOutputFormat(output) : { kind: json ? 'json' : 'table' };
      if (json && format.kind !== 'json') throw new UsageError(`--json means -o json: it does not go with -o ${output}`);
      this.chosenFormat = format;
    }
    return this.chosenFormat;
  }

  /**
   * Prints data: `human` renders it for people (`-o table`); the other formats print `document` (the agent's
   * answer as it came, or the command's own data) as JSON, YAML or the matches of a JSONPath.
   */
  async emit(document: unknown, human: () => void): Promise<void> {
    const format = this.format;
    if (format.kind === 'table') return human();
    this.io.stdout.write(formatDocument(document, format, await loadFormatters(format)));
  }

  /** For a stream of documents (follows): one per message, JSON on one line each, YAML as `---` documents. */
  async emitter(): Promise<((document: unknown) => void) | undefined> {
    const format = this.format;
    if (format.kind === 'table') return undefined;
    const lib = await loadFormatters(format);
    return (document) =>
      this.io.stdout.write(format.kind === 'yaml' ? `---\n${formatDocument(document, format, lib)}` : formatDocument(document, format, lib, { compact: true }));
  }

  /** Width tables must fit: the terminal's, else $COLUMNS, else 200. */
  get width(): number {
    return this.io.stdout.columns || Number(this.io.env.COLUMNS) || 200;
  }

  print(text: string): void {
    this.io.stdout.write(text.endsWith('\n') ? text : `${text}\n`);
  }

  warn(text: string): void {
    this.io.stderr.write(text.endsWith('\n') ? text : `${text}\n`);
  }
}
