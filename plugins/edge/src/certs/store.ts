/**
 * Certificates on disk: `<data>/certs/<domain>/fullchain.pem` and `privkey.pem` (0600, folder 0700).
 * Metadata (issuer, validity, names) is read from the certificate itself, so the files are the truth.
 */
import { X509Certificate } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { chmod, mkdir, readdir, rename, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';

export interface CertInfo {
  domain: string;
  names: string[];
  issuer: string;
  not_before: string;
  not_after: string;
  days_left: number;
  status: 'valid' | 'expiring' | 'expired';
}

const DAY = 86_400_000;

export class CertStore {
  constructor(
    readonly dir: string,
    private readonly renewBeforeDays: number,
  ) {}

  paths(domain: string) {
    const folder = join(this.dir, domain);
    return { folder, cert: join(folder, 'fullchain.pem'), key: join(folder, 'privkey.pem') };
  }

  has(domain: string): boolean {
    const p = this.paths(domain);
    return existsSync(p.cert) && existsSync(p.key);
  }

  info(domain: string, now = Date.now()): CertInfo | null {
    const p = this.paths(domain);
    let pem: string;
    try {
      pem = readFileSync(p.cert, 'utf8');
    } catch {
      return null;
    }
    const x = new X509Certificate(pem);
    const notAfter = Date.parse(x.validTo);
    const daysLeft = Math.floor((notAfter - now) / DAY);
    const names = (x.subjectAltName ?? '')
      .split(',')
      .map((s) => s.trim())
      .filter((s) => s.startsWith('DNS:'))
      .map((s) => s.slice(4));
    return {
      domain,
      names,
      issuer: (x.issuer.split('\n').find((l) => l.startsWith('CN=')) ?? x.issuer).replace(/^CN=/, ''),
      not_before: new Date(Date.parse(x.validFrom)).toISOString(),
      not_after: new Date(notAfter).toISOString(),
      days_left: daysLeft,
      status: notAfter <= now ? 'expired' : daysLeft < this.renewBeforeDays ? 'expiring' : 'valid',
    };
  }

  async domains(): Promise<string[]> {
    const entries = await readdir(this.dir, { withFileTypes: true }).catch(() => []);
    return entries
      .filter((e) => e.isDirectory() && this.has(e.name))
      .map((e) => e.name)
      .sort();
  }

  /** Writes key and chain atomically; the key is 0600. */
  async save(domain: string, key: string, chain: string): Promise<void> {
    const p = this.paths(domain);
    await mkdir(this.dir, { recursive: true, mode: 0o700 });
    await mkdir(p.folder, { recursive: true, mode: 0o700 });
    await writeFile(`${p.key}.tmp`, key, { mode: 0o600 });
    await chmod(`${p.key}.tmp`, 0o600);
    await writeFile(`${p.cert}.tmp`, chain, { mode: 0o644 });
    await rename(`${p.key}.tmp`, p.key);
    await rename(`${p.cert}.tmp`, p.cert);
  }

  async remove(domain: string): Promise<void> {
    await rm(this.paths(domain).folder, { recursive: true, force: true });
  }
}
