#!/usr/bin/env node
/** Entry point: load config, start the agent, stop gracefully on SIGTERM/SIGINT. Exit 2 on bad config. */
import { ConfigError, loadConfig } from './config/config.js';
import { startAgent } from './agent.js';
import { DataDirInUseError } from './store/data-dir-lock.js';

async function main(): Promise<void> {
  if (process.argv.includes('--help') || process.argv.includes('-h')) {
    process.stdout.write(
      'usage: host-agent [--config agent.yaml]\nEnvironment: AGENT_CONFIG, AGENT_LISTEN, AGENT_DATA_DIR, AGENT_ADMIN_PASSWORD, AGENT_LOG_LEVEL, AGENT_LOG_FORMAT, AGENT__<section>__<key>\n',
    );
    return;
  }
  let agent;
  try {
    agent = await startAgent(loadConfig());
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`configuration error: ${err.message}\n`);
      process.exit(2);
    }
    if (err instanceof DataDirInUseError) {
      process.stderr.write(`agent not started: ${err.message}\n`);
      process.exit(1);
    }
    process.stderr.write(`agent failed to start: ${(err as Error)?.stack ?? String(err)}\n`);
    process.exit(1);
  }
  let signals = 0;
  const onSignal = (signal: NodeJS.Signals) => {
    if (++signals > 1) process.exit(130);
    // In-flight requests get 10 s (see agent.stop); whatever still hangs after 30 s does not keep the process alive.
    setTimeout(() => {
      process.stderr.write(`shutdown did not finish in 30 s after ${signal}; exiting\n`);
      process.exit(1);
    }, 30_000).unref();
    agent
      .stop()
      .then(() => process.exit(0))
      .catch((err: unknown) => {
        process.stderr.write(`shutdown failed after ${signal}: ${String(err)}\n`);
        process.exit(1);
      });
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
}

void main();
