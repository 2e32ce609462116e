/**
 * `docker-compose config` without paying Python's start each time. Compose v1 is a Python program: importing it
 * costs ≈400 ms of every `config` call, more than the rest of a check, and a create pays it once more than a bare
 * `docker-compose up`. A warm parser imports compose once, then forks a fresh child per call that runs compose's
 * own entry point with that call's folder, arguments and environment: the same program, the same code path and the
 * same answer as a cold `docker-compose config` (a test compares the two over the guard's whole corpus), for ≈25 ms.
 * Each child starts from the pristine imported state and exits; nothing of one call reaches the next.
 *
 * Only `config` takes this path (the one call of the guard that only reads files); everything that touches the
 * engine runs the compose program as before. Used when the compose command is a Python console script (Debian's
 * `docker-compose` package); anything else, or a parser that cannot start, keeps the cold path.
 */
import { openSync, readSync, closeSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { execa, type ResultPromise } from 'execa';
import type { Logger } from '@agent/sdk';

/**
 * The parser. Requests are JSON lines on stdin ({cwd, args, env}); the answer to each is one JSON line on stdout
 * ({code, stdout, stderr}). A child writes into two in-memory files the parent reads once it has exited, so no
 * pipe can fill up. The child's stdin is /dev/null: it can never read the requests.
 */
const PARSER = `
import json, os, sys, traceback
from importlib.metadata import distribution
program = sys.argv[1]
entry = next(e for e in distribution('docker-compose').entry_points if e.group == 'console_scripts' and e.name == 'docker-compose')
main = entry.load()
devnull = os.open(os.devnull, os.O_RDONLY)
def read_all(fd):
    os.lseek(fd, 0, os.SEEK_SET)
    parts = []
    while True:
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            break
        parts.append(chunk)
    os.close(fd)
    return b''.join(parts).decode('utf-8', 'replace')
def child(request, out, err):
    code = 1
    try:
        os.dup2(devnull, 0)
        os.dup2(out, 1)
        os.dup2(err, 2)
        os.chdir(request['cwd'])
        os.environ.clear()
        os.environ.update(request['env'])
        sys.argv = [program] + request['args']
        main()
        code = 0
    except SystemExit as e:
        if e.code is None:
            code = 0
        elif isinstance(e.code, int):
            code = e.code
        else:
            print(e.code, file=sys.stderr)
    except BaseException:
        traceback.print_exc()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)
sys.stdout.write(json.dumps({'ready': True}) + '\\n')
sys.stdout.flush()
for line in sys.stdin:
    request = json.loads(line)
    out = os.memfd_create('stdout')
    err = os.memfd_create('stderr')
    pid = os.fork()
    if pid == 0:
        child(request, out, err)
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    if code < 0:
        code = 128 - code
    sys.stdout.write(json.dumps({'code': code, 'stdout': read_all(out), 'stderr': read_all(err)}) + '\\n')
    sys.stdout.flush()
`;

export interface ConfigResult {
  exit_code: number;
  /** stderr then stdout, as the cold path's combined output would show them. */
  output: string;
  stdout: string;
}

/** The Python interpreter of a console script (`#!/usr/bin/python3`), null when `program` is not one. */
export function pythonOf(program: string): string | null {
  let fd: number | null = null;
  try {
    fd = openSync(program, 'r');
    const head = Buffer.alloc(512);
    const text = head.subarray(0, readSync(fd, head, 0, head.length, 0)).toString('latin1');
    const shebang = /^#!(\/\S*python3(\.\d+)?)\s*\n/.exec(text);
    return shebang && text.includes("'docker-compose==") ? shebang[1]! : null;
  } catch {
    return null;
  } finally {
    if (fd !== null) closeSync(fd);
  }
}

/** The parser's answer to one call. */
interface Answer {
  code: number;
  stdout: string;
  stderr: string;
}

interface Pending {
  resolve(answer: Answer): void;
  reject(error: Error): void;
}

/** How long a parser is kept without calls: it holds ≈50 MB, a burst of deploys (CI) comes within minutes. */
const IDLE_MS = 5 * 60_000;
/** A `config` call reads a few files in ≈30 ms: one that takes this long is stuck and would not finish cold either. */
const CALL_TIMEOUT_MS = 60_000;
/** Importing compose takes ≈0.4 s; one that takes this long will not start. */
const READY_TIMEOUT_MS = 15_000;

/** A call that did not finish: compose is stuck on the input (no cold run would finish either). */
export class ConfigTimeout extends Error {}

export class WarmComposeConfig {
  private child: ResultPromise | null = null;
  private ready: Promise<void> | null = null;
  /** The call the parser is answering (calls go one at a time, see `run`). */
  private pending: Pending | null = null;
  private queue: Promise<unknown> = Promise.resolve();
  private idle: NodeJS.Timeout | null = null;
  private closed = false;

  constructor(
    private readonly python: string,
    private readonly program: string,
    private readonly log: Logger,
  ) {}

  /** Runs `config` (its `args`) in `cwd` with exactly `env`; calls are answered in turn by the one parser. */
  run(cwd: string, args: string[], env: Record<string, string>): Promise<ConfigResult> {
    const next = this.queue.then(() => this.call(cwd, args, env));
    this.queue = next.catch(() => undefined);
    return next;
  }

  /** Ends the parser (the agent stops). */
  close(): void {
    this.closed = true;
    this.end();
  }

  private async call(cwd: string, args: string[], env: Record<string, string>): Promise<ConfigResult> {
    if (this.closed) throw new Error('the compose parser was closed');
    if (this.idle) clearTimeout(this.idle);
    await this.start();
    const child = this.child!;
    const answer = new Promise<Answer>((resolve, reject) => (this.pending = { resolve, reject }));
    child.stdin!.write(`${JSON.stringify({ cwd, args, env })}\n`);
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new ConfigTimeout(`compose did not finish reading the file within ${CALL_TIMEOUT_MS / 1000} s`)), CALL_TIMEOUT_MS);
    });
    try {
      const r = await Promise.race([answer, timeout]);
      return { exit_code: r.code, stdout: r.stdout, output: r.stderr + r.stdout };
    } catch (err) {
      // A stuck or dead parser is replaced at the next call; this one's children go with its process group.
      this.end();
      throw err;
    } finally {
      clearTimeout(timer);
      if (!this.closed) {
        this.idle = setTimeout(() => this.end(), IDLE_MS);
        this.idle.unref();
      }
    }
  }

  private start(): Promise<void> {
    this.ready ??= new Promise<void>((resolve, reject) => {
      // Isolated mode: no folder of the caller on Python's path and no PYTHON* variable; its own process group, so
      // ending it ends a child still running.
      const child = execa(this.python, ['-I', '-c', PARSER, this.program], {
        env: { LANG: 'C.UTF-8' },
        extendEnv: false,
        detached: true,
        reject: false,
        buffer: false,
        stdin: 'pipe',
        stdout: 'pipe',
        stderr: 'pipe',
      });
      this.child = child;
      let stderr = '';
      child.stderr!.setEncoding('utf8');
      child.stderr!.on('data', (chunk: string) => {
        stderr = (stderr + chunk).slice(-4096);
      });
      let started = false;
      const timer = setTimeout(() => {
        if (!started) fail(new Error(`the compose parser did not start within ${READY_TIMEOUT_MS / 1000} s`));
      }, READY_TIMEOUT_MS);
      const fail = (err: Error) => {
        clearTimeout(timer);
        if (!started) reject(err);
        this.settle()?.reject(err);
        if (this.child === child) this.end();
      };
      createInterface({ input: child.stdout! }).on('line', (line) => {
        let message: Partial<Answer> & { ready?: boolean };
        try {
          message = JSON.parse(line);
        } catch {
          return fail(new Error(`the compose parser wrote an unexpected line: ${line.slice(0, 200)}`));
        }
        if (message.ready && !started) {
          started = true;
          clearTimeout(timer);
          return resolve();
        }
        this.settle()?.resolve({ code: message.code ?? 1, stdout: message.stdout ?? '', stderr: message.stderr ?? '' });
      });
      void child.then((r) => {
        if (this.closed) return;
        const why = r.failed && !started ? `the compose parser failed to start: ${stderr.trim().split('\n').slice(-3).join(' ')}` : 'the compose parser ended';
        fail(new Error(why));
      });
      // The parser never keeps the agent's process alive (a call in flight does, through its timer).
      child.unref();
      for (const stream of [child.stdin, child.stdout, child.stderr]) (stream as unknown as { unref?: () => void } | null)?.unref?.();
    });
    this.ready.catch(() => undefined);
    return this.ready;
  }

  /** The pending call, taken: it is answered once. */
  private settle(): Pending | null {
    const pending = this.pending;
    this.pending = null;
    return pending;
  }

  private end(): void {
    if (this.idle) clearTimeout(this.idle);
    this.idle = null;
    const child = this.child;
    this.child = null;
    this.ready = null;
    if (!child?.pid) return;
    this.settle()?.reject(new Error('the compose parser ended'));
    try {
      process.kill(-child.pid, 'SIGKILL');
    } catch {
      /* already gone */
    }
    this.log.debug('compose parser ended', { pid: child.pid });
  }
}
