/**
 * Background jobs (image pulls, backups, restores, deploys, and any job a plugin offers the same way): an answer
 * carrying a `job_id` is followed through the operation that reads that job (a GET of one path argument whose
 * answer has `status` and `progress`, found in the live description), until the job ends. When that reader has a
 * websocket (`<path>/stream`, the jobs plugin's), the job is followed there: every output line and progress update
 * as it happens; otherwise it is read again every half second. Output lines and step changes are printed as they
 * come, progress as a bar with percentage and ETA on a terminal, as plain lines anywhere else. Ctrl-C stops
 * following only: the job goes on in the agent, and the CLI says so, how to follow it again and how to cancel it.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { AgentApiError, AgentConnectionError, fillPath, isJobReader, type ApiDescription, type Operation } from '@agent/client';
import type { CliContext } from './context.js';
import { renderData } from './render.js';
import { visibleLength } from './style.js';

export type Job = Record<string, unknown> & { id?: string; status?: string; progress?: Record<string, unknown> | null; error?: unknown };

/** Exit code of a follow that Ctrl-C ended (the shell's code for an interrupted command). */
export const DETACHED_EXIT = 130;

/** A job failed or was left: the CLI already said what happened and exits with `code`. */
export class JobEnded extends Error {
  constructor(readonly code: number) {
    super(`job ended with exit code ${code}`);
  }
}

const WAITING = new Set(['pending', 'queued', 'waiting', 'running', 'starting', 'in_progress', 'started']);
const FAILED = new Set(['failed', 'error', 'errored', 'cancelled', 'canceled', 'aborted', 'interrupted']);

export const jobFinished = (job: Job): boolean => (typeof job.finished_at === 'string' && !!job.finished_at) || !WAITING.has(String(job.status));
export const jobFailed = (job: Job): boolean => FAILED.has(String(job.status));

/** The `job_id` an answer's data announces, if any. */
export function jobIdOf(data: unknown): string | undefined {
  const id = data && typeof data === 'object' ? (data as Record<string, unknown>).job_id : undefined;
  return typeof id === 'string' && id ? id : undefined;
}

export interface Measure {
  /** 0–1 when the job knows how far it is. */
  fraction?: number;
  /** Bytes done and in all, when the job counts bytes. */
  bytes?: number;
  total?: number;
  /** Units of another kind (items, lines): `current` of `count`. */
  current?: number;
  count?: number;
  /** Counts beside the bytes, e.g. `2/5 layers`. */
  detail?: string;
  step?: string;
  /** Seconds left, when the agent estimates it. */
  eta?: number;
}

const num = (v: unknown): number | undefined => (typeof v === 'number' && Number.isFinite(v) ? v : undefined);

/**
 * Reads the progress fields of the agent's jobs: `percent`, bytes (`current_bytes`/`bytes`, `total_bytes`), other
 * units (`current`, `total`: the jobs plugin's), layers, `step`, `eta_seconds`.
 */
export function measure(progress: unknown): Measure {
  const p = (progress && typeof progress === 'object' ? progress : {}) as Record<string, unknown>;
  const m: Measure = {};
  const bytes = num(p.current_bytes) ?? num(p.bytes);
  const totalBytes = num(p.total_bytes);
  if (bytes !== undefined || totalBytes !== undefined) {
    m.bytes = bytes ?? 0;
    if (totalBytes && totalBytes > 0) m.total = totalBytes;
  } else if (num(p.current) !== undefined) {
    m.current = num(p.current);
    const count = num(p.total);
    if (count && count > 0) m.count = count;
  }
  const percent = num(p.percent);
  if (percent !== undefined) m.fraction = Math.min(1, Math.max(0, percent / 100));
  else if (m.total && m.bytes !== undefined) m.fraction = Math.min(1, m.bytes / m.total);
  else if (m.count && m.current !== undefined) m.fraction = Math.min(1, m.current / m.count);
  const layersTotal = num(p.layers_total);
  if (layersTotal) m.detail = `${num(p.layers_done) ?? 0}/${layersTotal} layers`;
  if (typeof p.step === 'string' && p.step) m.step = p.step;
  const eta = num(p.eta_seconds);
  if (eta !== undefined) m.eta = eta;
  return m;
}

/** A line of a job's output: a string, or the jobs plugin's `{seq, stream, text}`. */
interface OutputLine {
  seq?: number;
  text: string;
}

function outputLines(output: unknown): OutputLine[] | undefined {
  if (!Array.isArray(output)) return undefined;
  const lines: OutputLine[] = [];
  for (const l of output) {
    if (typeof l === 'string') lines.push({ text: l });
    else if (l && typeof l === 'object' && typeof (l as OutputLine).text === 'string')
      lines.push({ seq: num((l as OutputLine).seq), text: (l as OutputLine).text });
  }
  return lines;
}

/**
 * The lines of `now` not in `seen`. The agent keeps only the last lines of a job's output, so older ones drop off
 * the front: the two lists are matched where the end of `seen` overlaps the start of `now`.
 */
export function newLines(seen: string[], now: string[]): string[] {
  for (let from = Math.max(0, seen.length - now.length); from < seen.length; from++) {
    const overlap = seen.length - from;
    let same = true;
    for (let i = 0; i < overlap && same; i++) same = seen[from + i] === now[i];
    if (same) return now.slice(overlap);
  }
  return now;
}

/** Human-readable sizes: the bytes package (1.5MB), here with a space (1.5 MB). */
async function byteFormatter(): Promise<(n: number) => string> {
  const { default: bytes } = await import('bytes');
  return (n) => bytes.format(n, { unitSeparator: ' ', decimalPlaces: 1 }) ?? `${n} B`;
}

const seconds = (s: number) =>
  s < 60
    ? `${Math.ceil(s)}s`
    : s < 3600
      ? `${Math.floor(s / 60)}m${String(Math.ceil(s % 60)).padStart(2, '0')}s`
      : `${Math.floor(s / 3600)}h${String(Math.floor((s % 3600) / 60)).padStart(2, '0')}m`;

/** What the progress is about, in words: `12.3 MB of 27.1 MB, 2/5 layers`, `120/300`. */
function amount(m: Measure, size: (n: number) => string): string {
  const parts: string[] = [];
  if (m.bytes !== undefined && (m.bytes > 0 || m.total)) parts.push(m.total ? `${size(m.bytes)} of ${size(m.total)}` : size(m.bytes));
  else if (m.current !== undefined) parts.push(m.count ? `${m.current}/${m.count}` : String(m.current));
  if (m.detail) parts.push(m.detail);
  return parts.join(', ');
}

interface Display {
  /** A line of the job's output, printed above the progress. */
  line(text: string): void;
  update(m: Measure): void;
  stop(): void;
}

/**
 * Not a terminal: plain lines, no control codes. A progress line when the job passes another tenth (or at most
 * every 10 s when it counts without a total), with the agent's ETA, else one from the rate since following began.
 */
export function plainDisplay(write: (s: string) => void, label: string, size: (n: number) => string): Display {
  let lastTenth = 0; // no "0%" line: the job has just started
  let lastAt = Date.now();
  let first: { at: number; fraction: number } | undefined;
  return {
    line: (text) => write(`${text}\n`),
    update: (m) => {
      const now = Date.now();
      if (m.fraction !== undefined) {
        first ??= { at: now, fraction: m.fraction };
        const tenth = Math.floor(m.fraction * 10);
        if (tenth <= lastTenth) return;
        lastTenth = tenth;
        const done = m.fraction - first.fraction;
        const eta = m.fraction >= 1 ? undefined : (m.eta ?? (done > 0 ? ((now - first.at) / 1000) * ((1 - m.fraction) / done) : undefined));
        const what = amount(m, size);
        write(`${label}: ${Math.floor(m.fraction * 100)}%${what ? ` (${what})` : ''}${eta !== undefined ? `, ETA ${seconds(eta)}` : ''}\n`);
      } else if ((m.bytes || m.current) && now - lastAt >= 10_000) {
        lastAt = now;
        write(`${label}: ${amount(m, size)}\n`);
      }
    },
    stop: () => undefined,
  };
}

/** A terminal: cli-progress's bar (percentage, ETA) kept on the last line, the job's output printed above it. */
async function terminalDisplay(stream: NodeJS.WriteStream, label: string, size: (n: number) => string): Promise<Display> {
  const { MultiBar, Format, Presets } = (await import('cli-progress')).default;
  let latest: Measure = {};
  // The line must fit the terminal (a longer one is cut at its edge): the bar gives way to the words.
  const barsize = Math.max(10, Math.min(30, (stream.columns || 80) - visibleLength(label) - 50));
  const multi = new MultiBar(
    {
      stream,
      // Ctrl-C is the follow's own (it detaches and says so); the bar is stopped there.
      gracefulExit: false,
      hideCursor: true,
      clearOnComplete: false,
      barsize,
      etaBuffer: 20,
      format: (options, params) => {
        const what = amount(latest, size);
        const step = latest.step ? `  ${latest.step}` : '';
        if (latest.fraction === undefined) return `${label}${what ? `  ${what}` : ''}${step}`;
        // The agent's estimate when it gives one, else cli-progress's from the updates it saw.
        const left = latest.eta ?? (typeof params.eta === 'number' ? params.eta : undefined);
        const eta = left !== undefined && left > 0 && params.progress < 1 ? `  ETA ${Format.TimeFormat(left, options, 1)}` : '';
        return `${label} ${Format.BarFormat(params.progress, options)} ${Math.floor(params.progress * 100)}%${what ? `  ${what}` : ''}${eta}${step}`;
      },
    },
    Presets.shades_classic,
  );
  const bar = multi.create(1000, 0);
  return {
    line: (text) => multi.log(`${text}\n`),
    update: (m) => {
      latest = m;
      bar.update(Math.round((m.fraction ?? 0) * 1000));
    },
    stop: () => multi.stop(),
  };
}

/** `pull nginx:latest` (a job's title), else `backup web`: what the job is, from the fields jobs have. */
function labelOf(job: Job, id: string): string {
  if (typeof job.title === 'string' && job.title) return job.title;
  const kind = typeof job.type === 'string' ? job.type : typeof job.kind === 'string' ? job.kind : 'job';
  const subject = [job.image, job.deployment, job.backup_id].find((v) => typeof v === 'string' && v);
  return `${kind} ${subject ? String(subject) : id}`;
}

const pathOf = (op: Operation, id: string) => fillPath(op, { [op.pathParams[0]!.name]: id });

/** Readers that may know a job: those of the group that started it, of its plugin, the jobs plugin's, the others. */
export function readersFor(description: ApiDescription, origin: Operation): Operation[] {
  const rank = (o: Operation) => (o.group === origin.group ? 0 : o.plugin && o.plugin === origin.plugin ? 1 : o.group === 'jobs' ? 2 : 3);
  return description
    .jobReadersFor(origin)
    .slice()
    .sort((a, b) => rank(a) - rank(b));
}

/** The reader that knows this job: the first candidate that does not answer 404 (or 400: another kind of id). */
async function findReader(ctx: CliContext, candidates: Operation[], id: string): Promise<{ reader: Operation; job: Job }> {
  const client = ctx.client();
  let lastError: unknown;
  for (const reader of candidates) {
    try {
      return { reader, job: (await client.call<Job>('GET', pathOf(reader, id))).data };
    } catch (err) {
      if (err instanceof AgentApiError && (err.status === 404 || err.status === 400)) {
        lastError = err;
        continue;
      }
      throw err;
    }
  }
  throw lastError ?? new Error(`no operation of this agent reads job '${id}'`);
}

/** `agentctl jobs cancel <id>` when an operation cancels this job (`POST <reader path>/cancel`, or another reader's). */
async function cancelHint(ctx: CliContext, description: ApiDescription, reader: Operation, id: string): Promise<string | undefined> {
  const cancels = description.operations.filter((o) => o.method === 'POST' && o.pathParams.length === 1 && o.path.endsWith('/cancel'));
  for (const cancel of cancels) {
    const owner = description.operations.find((o) => o.method === 'GET' && o.path === cancel.path.slice(0, -'/cancel'.length) && isJobReader(o));
    if (!owner) continue;
    if (owner !== reader) {
      const known = await ctx
        .client()
        .call('GET', pathOf(owner, id))
        .then(
          () => true,
          () => false,
        );
      if (!known) continue;
    }
    return `agentctl ${cancel.group} ${cancel.name} ${id}`;
  }
  return undefined;
}

export interface FollowJobOptions {
  /** The operation whose answer started the job (its readers are looked up from it), or the reader itself. */
  origin: Operation;
  /** Known reader (`--follow` on a job reader). */
  reader?: Operation;
  /** How often a job without a stream is read again (ms). */
  intervalMs?: number;
}

/** Follows a job until it ends; prints its final state in the chosen output format. */
export async function followJob(ctx: CliContext, description: ApiDescription, id: string, options: FollowJobOptions): Promise<void> {
  const client = ctx.client();
  const found = options.reader
    ? { reader: options.reader, job: (await client.call<Job>('GET', pathOf(options.reader, id))).data }
    : await findReader(ctx, readersFor(description, options.origin), id);
  const { reader } = found;
  let job = found.job;
  const stream = description.followStreamOf(reader);
  const label = labelOf(job, id);
  const size = await byteFormatter();
  const stderr = ctx.io.stderr;
  const display = stderr.isTTY ? await terminalDisplay(stderr, label, size) : plainDisplay((s) => stderr.write(s), label, size);

  const controller = new AbortController();
  let detached = false;
  const detach = () => {
    detached = true;
    controller.abort();
  };
  process.once('SIGINT', detach);
  process.once('SIGTERM', detach);
  let seen: string[] = [];
  let lastSeq = 0;
  let step: string | undefined;
  const showProgress = (progress: unknown, withOutput: boolean) => {
    const m = measure(progress);
    if (m.step && m.step !== step) {
      step = m.step;
      // A job with output lines of its own shows its step beside the progress only.
      if (!withOutput) display.line(m.step);
    }
    display.update(m);
  };
  const showLines = (lines: OutputLine[]) => {
    const numbered = lines.every((l) => l.seq !== undefined);
    if (numbered) {
      for (const l of lines) if (l.seq! > lastSeq) display.line(l.text);
      lastSeq = Math.max(lastSeq, ...lines.map((l) => l.seq!));
    } else {
      const texts = lines.map((l) => l.text);
      for (const l of newLines(seen, texts)) display.line(l);
      seen = texts;
    }
  };
  const show = (j: Job) => {
    const lines = outputLines(j.output);
    if (lines) showLines(lines);
    showProgress(j.progress, !!lines);
  };
  try {
    if (stream && !jobFinished(job)) {
      // The stream replays the output so far, then everything live, and ends with the job.
      await client.follow(pathOf(stream, id), {
        signal: controller.signal,
        onMessage: (message) => {
          const m = (message ?? {}) as Record<string, unknown>;
          if (m.type === 'line' && typeof m.text === 'string') showLines([{ seq: num(m.seq), text: m.text }]);
          else if (m.type === 'progress') showProgress(m.progress, true);
          else if ((m.type === 'job' || m.type === 'end') && m.job && typeof m.job === 'object') {
            job = m.job as Job;
            // The first message is the job as it is now; its progress is shown after the lines so far are replayed.
            if (m.type === 'end') showProgress(job.progress, true);
          }
        },
      });
    } else show(job);
    let failures = 0;
    // Without a stream (or when it ended before the job did): read the job again until it ends.
    while (!detached && !jobFinished(job)) {
      try {
        await sleep(options.intervalMs ?? 500, undefined, { signal: controller.signal });
      } catch {
        break; // Ctrl-C
      }
      try {
        job = (await client.call<Job>('GET', pathOf(reader, id))).data;
        failures = 0;
      } catch (err) {
        // The agent restarting or a network hiccup: try again a few times before giving up on following.
        if (!(err instanceof AgentConnectionError) || ++failures > 5) throw err;
        continue;
      }
      show(job);
    }
  } finally {
    display.stop();
    process.removeListener('SIGINT', detach);
    process.removeListener('SIGTERM', detach);
  }

  if (detached) {
    ctx.warn(ctx.err.yellow(`Stopped following: job ${id} goes on in the agent (Ctrl-C does not cancel it).`));
    ctx.warn(`Follow it again: agentctl ${reader.group} ${reader.name} ${id} --follow`);
    const cancel = await cancelHint(ctx, description, reader, id).catch(() => undefined);
    if (cancel) ctx.warn(`Cancel it: ${cancel}`);
    throw new JobEnded(DETACHED_EXIT);
  }
  const failed = jobFailed(job);
  await ctx.emit({ data: job }, () => {
    const took = typeof job.duration_ms === 'number' ? ` in ${seconds(job.duration_ms / 1000)}` : '';
    if (failed) {
      const why = typeof job.error === 'string' ? job.error : 'no reason given';
      const code = typeof job.error_code === 'string' ? ` (${job.error_code})` : '';
      ctx.warn(ctx.err.red(`✗ ${label} ${String(job.status)}${took}: ${why}${code}`));
      return;
    }
    ctx.print(ctx.out.green(`✓ ${label} ${String(job.status)}${took}`));
    const result = job.result;
    if (result && typeof result === 'object' && Object.keys(result).length) ctx.print(renderData(result, ctx.out, ctx.width));
  });
  if (failed) throw new JobEnded(1);
}
