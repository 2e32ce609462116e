/** `login`, `logout` and `profiles`: named connections stored 0600 in the user's config folder. */
import { Command } from 'commander';
import { AgentClient, DEFAULT_PROFILE, checkProfileName, loadDescription, normaliseUrl, type Profile } from '@agent/client';
import { UsageError, type CliContext } from '../context.js';
import { ask, readAll, readLine } from '../io.js';
import { renderTable } from '../render.js';

interface LoginOptions {
  username?: string;
  passwordStdin?: boolean;
  apiKey?: string;
  apiKeyStdin?: boolean;
}

/**
 * A secret piped in (`--password-stdin`, `--api-key-stdin`), read whole as `docker login --password-stdin` reads
 * it: one line ending (\n or \r\n) at the end is not part of it, anything else is.
 */
async function secretFromStdin(ctx: CliContext, flag: string, what: string): Promise<string> {
  const text = (await readAll(ctx.io.stdin)).replace(/\r?\n$/, '');
  if (!text) throw new UsageError(`${flag}: stdin held no ${what} (e.g. printf '%s\\n' "$SECRET" | agentctl login … ${flag})`);
  return text;
}

async function login(ctx: CliContext, opts: LoginOptions): Promise<void> {
  const { io, globals } = ctx;
  const file = ctx.store.read();
  const name = checkProfileName(globals.profile ?? io.env.AGENTCTL_PROFILE ?? file.current ?? DEFAULT_PROFILE);
  const existing = file.profiles[name];
  const rawUrl = globals.url ?? io.env.AGENTCTL_URL ?? existing?.url;
  if (!rawUrl) throw new UsageError('which agent? pass --url https://agent.example.com');
  const url = normaliseUrl(rawUrl);
  const client = new AgentClient({ url, userAgent: `agentctl/${ctx.version}` });
  const ways = [opts.username !== undefined || opts.passwordStdin, opts.apiKey !== undefined || opts.apiKeyStdin, globals.token !== undefined].filter(
    Boolean,
  ).length;
  if (ways > 1) throw new UsageError('use one of --username, --api-key or --token');

  let profile: Omit<Profile, 'saved_at'>;
  let who: string;
  if (globals.token !== undefined) {
    // A token obtained elsewhere (CI): check it, then keep it.
    client.token = globals.token;
    const check = await client.call<{ principal: { name: string; type: string } }>('GET', '/auth/validate');
    profile = { url, token: globals.token, auth: 'token' };
    who = `${check.data.principal.name} (${check.data.principal.type})`;
  } else if (opts.apiKey !== undefined || opts.apiKeyStdin) {
    const apiKey = opts.apiKeyStdin ? await secretFromStdin(ctx, '--api-key-stdin', 'API key') : opts.apiKey!.trim();
    if (!apiKey) throw new UsageError('empty API key');
    const result = await client.login({ apiKey });
    // The key itself is kept (it outlives the short-lived token it was exchanged for).
    profile = { url, token: apiKey, auth: 'api_key' };
    who = `API key '${result.api_key?.name ?? '?'}'`;
  } else {
    let username = opts.username ?? existing?.username;
    if (!username) {
      // With --password-stdin, stdin holds the password: the name cannot be asked there too (docker says the same).
      if (opts.passwordStdin) throw new UsageError('--password-stdin needs --username (stdin holds the password)');
      if (!io.stdin.isTTY) throw new UsageError('pass --username (or --api-key-stdin); no terminal to ask on');
      username = (await ask(io, 'Username', false)).trim();
    }
    let password: string;
    if (opts.passwordStdin) password = await secretFromStdin(ctx, '--password-stdin', 'password');
    else if (io.stdin.isTTY) password = await ask(io, `Password for ${username}`, true);
    else {
      // No terminal and no flag: the first line of stdin, as `echo "$PASSWORD" | agentctl login …` sends it.
      password = await readLine(io.stdin);
      if (!password) {
        throw new UsageError(
          `no password: stdin is not a terminal to ask on, and it held none. Pipe it in:\n  printf '%s\\n' "$PASSWORD" | agentctl login --url ${url} --username ${username} --password-stdin`,
        );
      }
    }
    if (!password) throw new UsageError('empty password');
    const result = await client.login({ username, password });
    profile = { url, token: result.token, auth: 'password', username, expires_at: result.expires_at };
    who = username;
  }
  ctx.store.save(name, profile);
  // Fetch the description now, so completion and help work right away.
  let agent: { version: string; operations: number; groups: number } | undefined;
  try {
    const authed = new AgentClient({ url, token: profile.token, userAgent: `agentctl/${ctx.version}` });
    const loaded = await loadDescription(authed, { cache: ctx.cache, refresh: true });
    agent = { version: loaded.version, operations: loaded.description.operations.length, groups: loaded.description.groups().length };
  } catch (err) {
    ctx.warn(`warning: could not read the agent's description: ${(err as Error).message}`);
  }
  // What was saved, never the token itself.
  const saved = { profile: name, url, auth: profile.auth, username: profile.username ?? null, expires_at: profile.expires_at ?? null, file: ctx.store.path };
  await ctx.emit({ ...saved, agent_version: agent?.version ?? null }, () => {
    ctx.print(`Logged in to ${url} as ${who}; saved as profile '${name}' in ${ctx.store.path}.`);
    if (profile.expires_at) ctx.print(ctx.out.dim(`The token is valid until ${profile.expires_at}.`));
    if (agent) ctx.print(ctx.out.dim(`Agent version ${agent.version}: ${agent.operations} operations in ${agent.groups} groups.`));
  });
}

export function authCommands(ctx: CliContext, run: (fn: () => Promise<void>) => Promise<void>): Command[] {
  const loginCmd = new Command('login')
    .description('log in to an agent and save the connection as a profile (with --url; --profile names it)')
    .option('-u, --username <name>', 'log in with a username; the password is asked on the terminal, else read from stdin')
    .option('--password-stdin', 'read the password from stdin, all of it but a final line break (as docker login --password-stdin)')
    .option('--api-key <key>', 'log in with an API key (kept in the profile)')
    .option('--api-key-stdin', 'read the API key from stdin (as --password-stdin)')
    .addHelpText(
      'after',
      '\nThe global --token <token> saves an existing token instead.\nProfiles live in $XDG_CONFIG_HOME/agentctl/config.json (default ~/.config/agentctl), mode 0600.',
    )
    .action((opts: LoginOptions) => run(() => login(ctx, opts)));

  const logoutCmd = new Command('logout').description('forget the saved login of a profile (the current one, or --profile)').action(() =>
    run(async () => {
      const name = ctx.globals.profile ?? ctx.io.env.AGENTCTL_PROFILE ?? ctx.store.read().current ?? DEFAULT_PROFILE;
      if (!ctx.store.remove(name)) throw new UsageError(`no profile '${name}'`);
      ctx.print(`Removed profile '${name}'.`);
    }),
  );

  const profiles = new Command('profiles').description('list, switch and remove saved profiles');
  profiles
    .command('list', { isDefault: true })
    .description('list profiles (* marks the current one)')
    .action(() =>
      run(async () => {
        const file = ctx.store.read();
        const rows = Object.entries(file.profiles).map(([name, p]) => ({
          current: name === file.current ? '*' : '',
          name,
          url: p.url,
          auth: p.auth,
          user: p.username ?? '',
          expires: p.expires_at ?? '',
        }));
        // Tokens stay in the file: no output format prints them.
        const document = {
          current: file.current ?? null,
          profiles: Object.fromEntries(Object.entries(file.profiles).map(([n, { token: _t, ...p }]) => [n, p])),
        };
        await ctx.emit(document, () => ctx.print(rows.length ? renderTable(rows, ctx.out) : 'No profiles yet: agentctl login --url <agent-url>'));
      }),
    );
  profiles
    .command('use')
    .argument('<name>')
    .description('make a profile the current one')
    .action((name: string) =>
      run(async () => {
        ctx.store.use(name);
        ctx.print(`Current profile: ${name}`);
      }),
    );
  profiles
    .command('remove')
    .argument('<name>')
    .description('delete a profile')
    .action((name: string) =>
      run(async () => {
        if (!ctx.store.remove(name)) throw new UsageError(`no profile '${name}'`);
        ctx.print(`Removed profile '${name}'.`);
      }),
    );
  return [loginCmd, logoutCmd, profiles];
}
