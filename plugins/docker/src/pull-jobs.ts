/** Image pulls run in the background; their progress (bytes per layer, status lines) is read through a job. */
import { randomUUID } from 'node:crypto';
import type { Logger } from '@agent/sdk';
import type { CredentialsService } from '@agent/plugin-credentials/api';
import type { DockerEngine } from './engine.js';
import { engineMessage, toHttpError } from './engine-errors.js';

const KEEP_JOBS = 100;
const KEEP_LINES = 200;

export interface PullJob {
  id: string;
  type: 'image.pull';
  image: string;
  status: 'running' | 'succeeded' | 'failed';
  progress: { percent: number; current_bytes: number; total_bytes: number; layers_done: number; layers_total: number };
  output: string[];
  authenticated: boolean;
  error: string | null;
  started_at: string;
  finished_at: string | null;
}

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

export class PullJobs {
  private readonly jobs = new Map<string, PullJob>();

  constructor(
    private readonly engine: DockerEngine,
    private readonly credentials: () => CredentialsService | undefined,
    private readonly log: Logger,
  ) {}

  list(): PullJob[] {
    return [...this.jobs.values()].reverse();
  }

  get(id: string): PullJob | undefined {
    return this.jobs.get(id);
  }

  /** Starts a pull and returns its job at once; the job records progress until the stream ends. */
  async start(image: string): Promise<PullJob> {
    this.engine.assertAvailable();
    const ref = withTag(image);
    const auth =
      (await this.credentials()
        ?.registryAuth(ref)
        .catch((err) => {
          this.log.warn('registry credentials lookup failed', { image: ref, error: String(err) });
          return null;
        })) ?? null;
    const job: PullJob = {
      id: randomUUID(),
      type: 'image.pull',
      image: ref,
      status: 'running',
      progress: { percent: 0, current_bytes: 0, total_bytes: 0, layers_done: 0, layers_total: 0 },
      output: [],
      authenticated: auth !== null,
      error: null,
      started_at: new Date().toISOString(),
      finished_at: null,
    };
    this.jobs.set(job.id, job);
    while (this.jobs.size > KEEP_JOBS) this.jobs.delete(this.jobs.keys().next().value!);
    void this.run(job, auth);
    return job;
  }

  private async run(job: PullJob, auth: Awaited<ReturnType<CredentialsService['registryAuth']>>): Promise<void> {
    const layers = new Map<string, { current: number; total: number; done: boolean }>();
    const line = (text: string) => {
      job.output.push(text);
      if (job.output.length > KEEP_LINES) job.output.splice(0, job.output.length - KEEP_LINES);
    };
    const finish = (error: string | null) => {
      job.status = error ? 'failed' : 'succeeded';
      job.error = error;
      job.finished_at = new Date().toISOString();
      if (!error) job.progress.percent = 100;
    };
    try {
      const stream = (await this.engine.client.pull(job.image, auth ? { authconfig: auth } : {})) as NodeJS.ReadableStream;
      let failure: string | null = null;
      await new Promise<void>((resolve, reject) => {
        this.engine.client.modem.followProgress(
          stream,
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
              if (status !== 'Downloading' && status !== 'Extracting') line(`${event.id}: ${status}`);
            } else if (status) line(event.id ? `${event.id}: ${status}` : status);
            let current = 0;
            let total = 0;
            let done = 0;
            for (const l of layers.values()) {
              current += l.current;
              total += l.total;
              if (l.done) done++;
            }
            job.progress = {
              current_bytes: current,
              total_bytes: total,
              layers_done: done,
              layers_total: layers.size,
              percent: total > 0 ? Math.min(99, Math.round((current / total) * 1000) / 10) : layers.size ? Math.round((done / layers.size) * 99) : 0,
            };
          },
        );
      });
      finish(failure);
    } catch (err) {
      const mapped = toHttpError(err, `image '${job.image}'`);
      finish(engineMessage(mapped) || 'pull failed');
    }
    if (job.status === 'failed') this.log.warn('image pull failed', { image: job.image, error: job.error });
  }
}
