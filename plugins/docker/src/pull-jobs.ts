/**
 * Image pulls: the pull itself (`pullImage`, behind `docker.images.pull`, which redeploys use too) and pulls as jobs
 * of the jobs service (`POST /api/images/pull` → 202 `{job_id}`): progress, output, cancel (the engine connection
 * is closed and the engine stops the pull), `interrupted` after a restart. `GET /api/images/pulls[/:id]` answer
 * the shape they answered before the jobs service existed, as views of those jobs.
 */
import { errors, HttpError, isHttpError, type Logger, type Principal } from '@agent/sdk';
import type { JobView, JobsService } from '@agent/plugin-jobs/api';
import type { CredentialsService } from '@agent/plugin-credentials/api';
import type Docker from 'dockerode';
import type { DockerService, PullProgress } from './api.js';
import { engineMessage, toHttpError } from './engine-errors.js';

/** Output lines a pull view shows (the newest), and pull jobs listed. */
const VIEW_LINES = 200;
const LIST_PULLS = 100;
const KIND = 'image.pull';

interface PullEvent {
  status?: string;
  id?: string;
  progressDetail?: { current?: number; total?: number };
  error?: string;
  errorDetail?: { message?: string };
}

/** `nginx` → `nginx:latest` (a pull without tag would fetch every tag). */
export function withTag(ref: string): string {
  if (ref.includes('@')) return ref;
  const last = ref.slice(ref.lastIndexOf('/') + 1);
  return last.includes(':') ? ref : `${ref}:latest`;
}

export type RegistryAuth = Awaited<ReturnType<CredentialsService['registryAuth']>>;

/** What a pull needs of the engine (the docker service's engine, which pulls through `pullImage`). */
interface PullingEngine {
  assertAvailable(): void;
  readonly client: Docker;
}

/** What pull jobs need of it. */
interface PullJobsEngine {
  assertAvailable(): void;
  readonly images: Pick<DockerService['images'], 'pull'>;
}

export interface PullOptions {
  signal?: AbortSignal;
  onStart?: (pull: { image: string; authenticated: boolean }) => void;
  onProgress?: (progress: PullProgress) => void;
  onLine?: (line: string) => void;
}

/**
 * Pulls `ref` through the engine's API. Aborting closes the connection, which makes the engine stop the pull
 * (nothing runs on the host for it: no process to leave behind).
 */
export async function pullImage(
  engine: PullingEngine,
  credentials: () => CredentialsService | undefined,
  log: Logger,
  ref: string,
  options: PullOptions = {},
): Promise<{ image: string; authenticated: boolean }> {
  engine.assertAvailable();
  const image = withTag(ref);
  const { signal } = options;
  const auth: RegistryAuth =
    (await credentials()
      ?.registryAuth(image)
      .catch((err) => {
        log.warn('registry credentials lookup failed', { image, error: String(err) });
        return null;
      })) ?? null;
  options.onStart?.({ image, authenticated: auth !== null });
  signal?.throwIfAborted();
  const layers = new Map<string, { current: number; total: number; done: boolean }>();
  let stream: (NodeJS.ReadableStream & { destroy?: (err?: Error) => void }) | null = null;
  const abort = () => stream?.destroy?.();
  signal?.addEventListener('abort', abort, { once: true });
  try {
    stream = (await engine.client.pull(image, auth ? { authconfig: auth } : {})) as NodeJS.ReadableStream;
    if (signal?.aborted) abort();
    let failure: string | null = null;
    await new Promise<void>((resolve, reject) => {
      engine.client.modem.followProgress(
        stream!,
        (err: Error | null) => (err ? reject(err) : resolve()),
        (event: PullEvent) => {
          if (event.error || event.errorDetail) {
            failure = event.errorDetail?.message ?? event.error ?? 'pull failed';
            return;
          }
          const status = event.status ?? '';
          if (event.id && /^[0-9a-f]{12}$/.test(event.id)) {
            const layer = layers.get(event.id) ?? { current: 0, total: 0, done: false };
            if (status === 'Downloading' && event.progressDetail?.total) {
              layer.current = event.progressDetail.current ?? layer.current;
              layer.total = event.progressDetail.total;
            } else if (/^(Download complete|Pull complete|Already exists)$/.test(status)) {
              layer.done = true;
              if (layer.total) layer.current = layer.total;
            }
            layers.set(event.id, layer);
            if (status !== 'Downloading' && status !== 'Extracting') options.onLine?.(`${event.id}: ${status}`);
          } else if (status) options.onLine?.(event.id ? `${event.id}: ${status}` : status);
          let current = 0;
          let total = 0;
          let done = 0;
          for (const l of layers.values()) {
            current += l.current;
            total += l.total;
            if (l.done) done++;
          }
          options.onProgress?.({
            current_bytes: current,
            total_bytes: total,
            layers_done: done,
            layers_total: layers.size,
            // 100 only once the engine said it is done.
            percent: total > 0 ? Math.min(99, Math.round((current / total) * 1000) / 10) : layers.size ? Math.round((done / layers.size) * 99) : 0,
          });
        },
      );
    });
    // A stream closed by the abort may end as if it finished.
    signal?.throwIfAborted();
    if (failure) throw new HttpError(502, 'PULL_FAILED', `pulling '${image}' failed: ${failure}`);
    return { image, authenticated: auth !== null };
  } catch (err) {
    if (signal?.aborted) throw signal.reason;
    if (isHttpError(err)) throw err;
    const mapped = toHttpError(err, `image '${image}'`);
    if (isHttpError(mapped) && mapped.status === 503) throw mapped;
    throw new HttpError(502, 'PULL_FAILED', `pulling '${image}' failed: ${engineMessage(mapped) || 'pull failed'}`);
  } finally {
    signal?.removeEventListener('abort', abort);
  }
}

/** What `GET /api/images/pulls/:id` answers (its shape before pulls were jobs of the jobs service). */
export interface PullView {
  id: string;
  type: 'image.pull';
  image: string;
  status: 'running' | 'succeeded' | 'failed' | 'cancelled' | 'interrupted';
  progress: PullProgress;
  output: string[];
  authenticated: boolean;
  error: string | null;
  started_at: string;
  finished_at: string | null;
}

/** What a pull job reports (its record's `result`, also when it fails or is cancelled). */
interface PullReport {
  image: string;
  authenticated: boolean;
  progress?: PullProgress;
}

const emptyProgress = (): PullProgress => ({ percent: 0, current_bytes: 0, total_bytes: 0, layers_done: 0, layers_total: 0 });

export class PullJobs {
  /** Progress of the pulls running now, per job (the job's own progress has no layer counts). */
  private readonly live = new Map<string, PullProgress>();

  constructor(
    private readonly engine: PullJobsEngine,
    /** The jobs plugin's service, or the docker plugin's own (see index.ts). */
    private readonly jobs: () => JobsService,
    private readonly log: Logger,
  ) {}

  list(): PullView[] {
    return this.jobs()
      .list({ kind: KIND, limit: LIST_PULLS, offset: 0 })
      .items.map((job) => this.view(job));
  }

  get(id: string): PullView | undefined {
    const job = this.jobs().get(id);
    return job && job.kind === KIND ? this.view(job) : undefined;
  }

  /** Starts a pull job and returns its view at once; the job records progress until the stream ends. */
  start(image: string, principal: Principal | null): PullView {
    this.engine.assertAvailable();
    const ref = withTag(image);
    const job = this.jobs().start<PullReport>({
      kind: KIND,
      title: `pull ${ref}`,
      deployment: null,
      principal,
      run: async (job) => {
        let report: PullReport = { image: ref, authenticated: false };
        job.report(report);
        const progress = emptyProgress();
        this.live.set(job.id, progress);
        try {
          await this.engine.images.pull(ref, {
            signal: job.signal,
            onStart: ({ authenticated }) => {
              report = { ...report, authenticated };
              job.report(report);
            },
            onLine: (line) => job.output(line),
            onProgress: (p) => {
              Object.assign(progress, p);
              job.progress({
                step: p.layers_total ? `${p.layers_done}/${p.layers_total} layers` : 'pulling',
                current: p.current_bytes,
                total: p.total_bytes || null,
                percent: p.percent,
              });
            },
          });
          return { ...report, progress: { ...progress, percent: 100 } };
        } catch (err) {
          job.report({ ...report, progress: { ...progress } });
          if (!job.signal.aborted) this.log.warn('image pull failed', { image: ref, error: (err as Error).message });
          throw err;
        } finally {
          this.live.delete(job.id);
        }
      },
    });
    return this.view(job.view());
  }

  private view(job: JobView): PullView {
    const report = (job.result ?? {}) as Partial<PullReport>;
    const progress = this.live.get(job.id) ?? report.progress ?? emptyProgress();
    const lines = this.jobs()
      .lines(job.id)
      .filter((l) => l.stream !== 'info')
      .map((l) => l.text);
    return {
      id: job.id,
      type: KIND,
      image: report.image ?? job.title.replace(/^pull /, ''),
      // A job not started yet is a pull about to run.
      status: job.status === 'pending' ? 'running' : job.status,
      progress: { ...progress, percent: job.status === 'succeeded' ? 100 : progress.percent },
      output: lines.slice(-VIEW_LINES),
      authenticated: report.authenticated ?? false,
      error: job.error,
      started_at: job.started_at ?? job.created_at,
      finished_at: job.finished_at,
    };
  }
}

/** The job of a pull id, or 404 (the same for an id of another kind of job). */
export const notFound = (id: string) => errors.notFound(`pull job ${id} not found`);
