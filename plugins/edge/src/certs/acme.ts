/**
 * ACME issuance with HTTP-01 through the proxy: the challenge file is written to the webroot every agent server
 * serves at `/.well-known/acme-challenge/` on the HTTP port. The account key is kept per directory URL (0600).
 */
import { createHash } from 'node:crypto';
import { Agent } from 'node:https';
import { readFileSync } from 'node:fs';
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type * as Acme from 'acme-client';
import { cjsExports, type Logger } from '@agent/sdk';
import type { EdgeConfig } from '../config.js';

// acme-client (with its crypto stack, ~28 MB) is loaded when a certificate is first needed, not at agent start.
let acmeModule: Promise<typeof Acme> | null = null;

export class AcmeIssuer {
  private client: Acme.Client | null = null;

  constructor(
    private readonly config: EdgeConfig['certificates'],
    private readonly dataDir: string,
    private readonly webroot: string,
    private readonly log: Logger,
  ) {}

  private load(): Promise<typeof Acme> {
    return (acmeModule ??= import('acme-client').then(cjsExports).then((acme) => {
      if (this.config.directory_ca_file) {
        // A private ACME directory (tests, internal CAs): trust its CA for the API calls.
        acme.axios.defaults.httpsAgent = new Agent({ ca: readFileSync(this.config.directory_ca_file) });
      }
      return acme;
    }));
  }

  private async account(): Promise<Acme.Client> {
    if (this.client) return this.client;
    const acme = await this.load();
    const dir = join(this.dataDir, 'acme');
    await mkdir(dir, { recursive: true, mode: 0o700 });
    const keyFile = join(dir, `account-${createHash('sha256').update(this.config.directory_url).digest('hex').slice(0, 16)}.pem`);
    let key: Buffer;
    try {
      key = await readFile(keyFile);
    } catch {
      key = await acme.crypto.createPrivateEcdsaKey();
      await writeFile(keyFile, key, { mode: 0o600 });
    }
    const client = new acme.Client({ directoryUrl: this.config.directory_url, accountKey: key, backoffAttempts: 10, backoffMin: 200, backoffMax: 5000 });
    await client.createAccount({ termsOfServiceAgreed: true, ...(this.config.email ? { contact: [`mailto:${this.config.email}`] } : {}) });
    this.client = client;
    return client;
  }

  /** Obtains a certificate for `names` (the first is the subject); returns the private key and the chain (PEM). */
  async issue(names: string[]): Promise<{ key: string; chain: string }> {
    const client = await this.account();
    const acme = await this.load();
    const key = await acme.crypto.createPrivateEcdsaKey();
    const [, csr] = await acme.crypto.createCsr({ commonName: names[0], altNames: names }, key);
    const order = await client.createOrder({ identifiers: names.map((value) => ({ type: 'dns', value })) });
    const tokens: string[] = [];
    const challengeDir = join(this.webroot, '.well-known', 'acme-challenge');
    try {
      for (const authz of await client.getAuthorizations(order)) {
        if (authz.status === 'valid') continue;
        const challenge = authz.challenges.find((c) => c.type === 'http-01');
        if (!challenge) throw new Error(`no http-01 challenge offered for ${authz.identifier.value}`);
        if (!/^[A-Za-z0-9_-]+$/.test(challenge.token)) throw new Error('unexpected characters in the challenge token');
        await mkdir(challengeDir, { recursive: true, mode: 0o755 });
        await writeFile(join(challengeDir, challenge.token), await client.getChallengeKeyAuthorization(challenge), { mode: 0o644 });
        tokens.push(challenge.token);
        await client.completeChallenge(challenge);
        await client.waitForValidStatus(challenge);
      }
      const finalized = await client.finalizeOrder(order, csr);
      const chain = await client.getCertificate(finalized);
      this.log.info('certificate issued', { domain: names[0], names: names.length });
      return { key: key.toString(), chain };
    } finally {
      for (const t of tokens) await rm(join(challengeDir, t), { force: true });
    }
  }
}
