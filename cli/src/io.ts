/** The process surroundings of the CLI (streams, environment), injectable so tests can run it in-process too. */
import { createInterface } from 'node:readline';

export interface CliIO {
  stdout: NodeJS.WriteStream;
  stderr: NodeJS.WriteStream;
  stdin: NodeJS.ReadStream;
  env: NodeJS.ProcessEnv;
  cwd: string;
}

export const processIO = (): CliIO => ({ stdout: process.stdout, stderr: process.stderr, stdin: process.stdin, env: process.env, cwd: process.cwd() });

/** Everything on stdin (for `--data -`). */
export async function readAll(stdin: NodeJS.ReadStream): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of stdin) chunks.push(Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk));
  return Buffer.concat(chunks).toString('utf8');
}

/** The first line of stdin (passwords and keys piped in). */
export async function readLine(stdin: NodeJS.ReadStream): Promise<string> {
  const rl = createInterface({ input: stdin, terminal: false });
  try {
    for await (const line of rl) return line;
    return '';
  } finally {
    rl.close();
  }
}

/** Ctrl-C at a prompt: nothing was sent. */
export class PromptCancelled extends Error {
  constructor() {
    super('cancelled');
  }
}

/**
 * Asks on the terminal (Inquirer's prompts, on stderr so stdout stays the command's output); `hidden` echoes
 * nothing (passwords).
 */
export async function ask(io: CliIO, question: string, hidden: boolean): Promise<string> {
  const context = { input: io.stdin, output: io.stderr };
  try {
    if (hidden) {
      const { default: password } = await import('@inquirer/password');
      return await password({ message: question }, context);
    }
    const { default: input } = await import('@inquirer/input');
    return await input({ message: question }, context);
  } catch (err) {
    if ((err as Error)?.name === 'ExitPromptError') throw new PromptCancelled();
    throw err;
  }
}
