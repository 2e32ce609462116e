/**
 * The `agentctl` program: static commands (login, profiles, completion) plus one command group per tag of the
 * agent's live description, built at start from the cached or freshly downloaded description.
 */
import { createRequire } from 'node:module';
import { Command, CommanderError, Option } from 'commander';
import { AgentApiError, AgentConnectionError, RequestInvalidError, type Operation } from '@agent/client';
import { authCommands } from './commands/auth.js';
import { STATIC_COMMANDS, SHELLS, completionCandidates, completionScript, printCandidates } from './commands/completion.js';
import { groupCommand } from './commands/operations.js';
import { doctorCommand } from './commands/doctor.js';
import { CliContext, UsageError, type GlobalOptions } from './context.js';
import { explain } from './explain.js';
import { processIO, type CliIO } from './io.js';
import { JobEnded } from './jobs.js';
import { formatDocument, loadFormatters, type OutputFormat } from './output.js';

const VERSION = (createRequire(import.meta.url)('../package.json') as { version: string }).version;

/** Exit codes: 0 done, 1 the agent refused or could not be reached, 2 the command or request was invalid (nothing sent). */
export const EXIT = { ok: 0, failed: 1, usage: 2 } as const;

const VALUE_OPTIONS = new Set(['--profile', '--url', '--token', '-d', '--data', '-f', '--field', '-q', '--query', '--output-file']);

/** Global options and the command words, read before commander runs (the commands depend on them). */
export function prescan(argv: string[]): { globals: GlobalOptions; positionals: string[]; help: boolean } {
  const globals: GlobalOptions = {};
  const positionals: string[] = [];
  let help = false;
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (arg === '--') {
      positionals.push(...argv.slice(i + 1));
      break;
    }
    if (!arg.startsWith('-') || arg === '-') {
      positionals.push(arg);
      continue;
    }
    // `-ojson` and `-o=json`, as kubectl takes them (a JSONPath holds '=' of its own: `-o jsonpath={.a}`).
    if (/^-o[^-]/.test(arg)) {
      globals.output = arg.slice(arg[2] === '=' ? 3 : 2);
      continue;
    }
    const eq = arg.indexOf('=');
    const flag = eq > 0 ? arg.slice(0, eq) : arg;
    const value = () => (eq > 0 ? arg.slice(eq + 1) : argv[++i]);
    if (flag === '--profile') globals.profile = value();
    else if (flag === '-o' || flag === '--output') globals.output = value();
    else if (flag === '--url') globals.url = value();
    else if (flag === '--token') globals.token = value();
    else if (flag === '--json') globals.json = true;
    else if (flag === '--refresh') globals.refresh = true;
    else if (flag === '--no-color') globals.color = false;
    else if (flag === '-h' || flag === '--help') help = true;
    else if (VALUE_OPTIONS.has(flag) && eq < 0) i++;
  }
  return { globals, positionals, help };
}

/** The format errors are printed in: JSON or YAML on stdout when asked for (scripts read one stream), else words. */
function errorFormat(ctx: CliContext): OutputFormat | undefined {
  try {
    const format = ctx.format;
    return format.kind === 'json' || format.kind === 'yaml' ? format : undefined;
  } catch {
    return undefined; // the format itself is what is wrong: said in words
  }
}

async function report(ctx: CliContext, err: unknown, op?: Operation): Promise<number> {
  const { err: style } = ctx;
  if (err instanceof JobEnded) return err.code;
  if (err instanceof UsageError) {
    ctx.warn(`${style.red('error:')} ${err.message}`);
    return EXIT.usage;
  }
  if (err instanceof RequestInvalidError) {
    ctx.warn(`${style.red('Request not sent')} — it does not match the operation's schema:`);
    for (const p of err.problems) ctx.warn(`  - ${p}`);
    if (op) ctx.warn(style.dim(`Fields and parameters: agentctl ${op.group} ${op.name} --help`));
    return EXIT.usage;
  }
  if (err instanceof AgentApiError) {
    const format = errorFormat(ctx);
    if (format) {
      ctx.io.stdout.write(formatDocument(err.body, format, await loadFormatters(format)));
      return EXIT.failed;
    }
    ctx.warn(`${style.red('Error:')} ${err.body.error} (${err.code}, HTTP ${err.status})`);
    for (const [key, value] of Object.entries(err.body)) {
      if (key !== 'error' && key !== 'code') ctx.warn(`  ${key}: ${typeof value === 'string' ? value : JSON.stringify(value)}`);
    }
    let conn;
    try {
      conn = ctx.connection();
    } catch {
      conn = undefined;
    }
    const words = explain(err.status, err.body, {
      permission: op?.permission,
      command: op ? `agentctl ${op.group} ${op.name}` : undefined,
      profileName: conn?.profileName,
      tokenSource: conn?.source.token,
      tokenExpiredAt: conn?.source.token === 'profile' ? conn.profile?.expires_at : undefined,
    });
    if (words) ctx.warn(style.yellow(words));
    return EXIT.failed;
  }
  if (err instanceof AgentConnectionError) {
    ctx.warn(`${style.red('error:')} ${err.message}`);
    return EXIT.failed;
  }
  ctx.warn(`${style.red('error:')} ${(err as Error)?.message ?? String(err)}`);
  return EXIT.failed;
}

export async function run(argv: string[], io: CliIO = processIO()): Promise<number> {
  if (argv[0] === '__complete') {
    const [shell = 'bash', ...words] = argv.slice(1);
    const current = words.pop() ?? '';
    printCandidates(io, shell, completionCandidates(io, words, current));
    return EXIT.ok;
  }
  // `agentctl help <group> [operation]` is `agentctl <group> [operation] --help` (commander only goes one level).
  const words = prescan(argv).positionals;
  if (words[0] === 'help' && words.length > 1) {
    const at = argv.indexOf('help');
    argv = [...argv.slice(0, at), ...argv.slice(at + 1), '--help'];
  }
  const pre = prescan(argv);
  const ctx = new CliContext(io, pre.globals, VERSION);
  let exitCode: number = EXIT.ok;
  const runAction = async (fn: () => Promise<void>, op?: Operation) => {
    try {
      await fn();
    } catch (err) {
      exitCode = await report(ctx, err, op);
    }
  };

  const program = new Command('agentctl')
    .description('Command-line client of the host agent. Its commands come from the live description of the agent it talks to.')
    .version(VERSION, '-V, --version')
    .addOption(new Option('--profile <name>', 'saved profile to use (env AGENTCTL_PROFILE)'))
    .addOption(new Option('--url <url>', 'agent URL, overrides the profile (env AGENTCTL_URL)'))
    .addOption(new Option('--token <token>', 'token or API key, overrides the profile (env AGENTCTL_TOKEN)'))
    .addOption(new Option('-o, --output <format>', 'output: table (default), json, yaml or jsonpath=<expr> (the answer as -o json shows it)'))
    .option('--json', 'the same as -o json')
    .option('--refresh', "download the agent's description again")
    .option('--no-color', 'no colours');
  program.configureHelp({ showGlobalOptions: true, sortSubcommands: false });
  for (const cmd of authCommands(ctx, runAction)) program.addCommand(cmd);
  program.addCommand(doctorCommand(ctx, runAction, (code) => (exitCode = code)));
  program
    .command('completion')
    .description('print a completion script: source <(agentctl completion bash) — or zsh, or fish')
    .argument('<shell>', SHELLS.join(', '))
    .addHelpText(
      'after',
      [
        '',
        'bash:  source <(agentctl completion bash)        or save it in ~/.local/share/bash-completion/completions/agentctl',
        'zsh:   source <(agentctl completion zsh)         after compinit; or save it as _agentctl in a folder of $fpath',
        'fish:  agentctl completion fish | source         or save it as ~/.config/fish/completions/agentctl.fish',
      ].join('\n'),
    )
    .action((shell: string) =>
      runAction(async () => {
        const script = completionScript(shell);
        if (!script) throw new UsageError(`no completion for '${shell}' (${SHELLS.join(', ')})`);
        ctx.io.stdout.write(script);
      }),
    );

  const [first, second] = pre.positionals;
  const staticNames = new Set([...STATIC_COMMANDS.map(([n]) => n)]);
  const versionOnly = !first && argv.some((a) => a === '-V' || a === '--version');
  const wantsOperations = first ? !staticNames.has(first) || first === 'help' : !versionOnly;
  if (wantsOperations) {
    try {
      let loaded = await ctx.description();
      const target = first && !staticNames.has(first) ? first : undefined;
      const targetOp = target ? second : undefined;
      if (target && !loaded.fresh) {
        // A command the cached copy does not know may be new on the agent: look again before giving up.
        const group = loaded.description.group(target);
        if (!group || (targetOp && !targetOp.startsWith('-') && !loaded.description.find(target, targetOp))) loaded = await ctx.description(true);
      }
      // Only the operation being called gets its full command (options, schemas); the others are named only,
      // which is all help listings and "did you mean" suggestions need.
      const wanted = target && targetOp ? loaded.description.find(target, targetOp) : undefined;
      for (const group of loaded.description.groups()) {
        if (staticNames.has(group.name)) continue;
        program.addCommand(groupCommand(ctx, loaded.description, group, runAction, wanted));
      }
      program.addHelpText(
        'after',
        `\nAgent ${ctx.connection().url} (version ${loaded.version}). Help on a group: agentctl <group> --help; on an operation: agentctl <group> <operation> --help.`,
      );
    } catch (err) {
      if (first && first !== 'help') return await report(ctx, err);
      program.addHelpText('after', `\nNot connected (${(err as Error).message}): log in to see the agent's operations.`);
    }
  }

  // Commands added with addCommand do not inherit these; set them everywhere (help formats stay per command).
  const inherit = (cmd: Command) => {
    cmd
      .exitOverride()
      .showSuggestionAfterError(true)
      .configureOutput({ writeOut: (s) => io.stdout.write(s), writeErr: (s) => io.stderr.write(s) });
    cmd.commands.forEach(inherit);
  };
  inherit(program);
  try {
    await program.parseAsync(argv, { from: 'user' });
  } catch (err) {
    if (err instanceof CommanderError) return err.exitCode === 0 ? EXIT.ok : EXIT.usage;
    return await report(ctx, err);
  }
  return exitCode;
}
