/**
 * Revocation of what outlives its checks. A websocket, a streamed answer or a request proxied to an app plugin passed
 * authentication and `admit` when it opened, and may stay open for hours. Each one is tracked here with its bearer
 * credential and those checks. When the principal directory reports that users' rights changed
 * (`principals.changed`: a key revoked or deleted, a user disabled, deleted, demoted or given a new password, a grant
 * changed or removed), every connection of those users (their keys' included) is authenticated and admitted again at
 * once, and ended when it no longer passes: 401 when the credential is no longer accepted, 403 when the principal
 * may no longer do what the connection does. A sweep every minute also ends those whose token or key expired.
 */
import { errors, isHttpError, type HttpError, type Principal, type PrincipalDirectory } from '@agent/sdk';

export interface LiveConnection {
  /** The bearer credential (token or API key) it authenticated with, and the client's address. */
  readonly bearer: string;
  readonly ip: string;
  /** Runs again the checks the connection passed when it opened; throws when they fail now. */
  admit(principal: Principal): void;
  /** Ends the connection; `why` is 401 `TOKEN_REVOKED` or 403 `ACCESS_REVOKED`. */
  end(why: HttpError): void;
}

const SWEEP_MS = 60_000;

export class LiveConnections {
  private readonly byUser = new Map<number, Set<LiveConnection>>();
  private readonly sweep: NodeJS.Timeout;

  constructor(private readonly principals: PrincipalDirectory) {
    this.sweep = setInterval(() => this.recheck([...this.byUser.keys()]), SWEEP_MS).unref();
  }

  /** Tracks a connection of `principal`; call the returned function once it is closed. */
  track(principal: Principal, connection: LiveConnection): () => void {
    const user = principal.user_id;
    // An app's own (system) principal has no user: its rights last as long as the agent run.
    if (user === null) return () => undefined;
    let open = this.byUser.get(user);
    if (!open) this.byUser.set(user, (open = new Set()));
    open.add(connection);
    return () => {
      open.delete(connection);
      if (open.size === 0 && this.byUser.get(user) === open) this.byUser.delete(user);
    };
  }

  /** Authenticates and admits again every connection of these users (their keys' included); ends those that fail. */
  recheck(userIds: readonly number[]): void {
    for (const id of userIds) for (const connection of [...(this.byUser.get(id) ?? [])]) void this.check(id, connection);
  }

  /** How many connections are tracked (the doctor, tests). */
  get size(): number {
    let n = 0;
    for (const open of this.byUser.values()) n += open.size;
    return n;
  }

  close(): void {
    clearInterval(this.sweep);
  }

  private async check(user: number, connection: LiveConnection): Promise<void> {
    let why: HttpError | null = null;
    try {
      const principal = await this.principals.authenticate(connection.bearer, connection.ip);
      if (!principal) why = errors.unauthorized('the credential is no longer accepted', 'TOKEN_REVOKED');
      else connection.admit(principal);
    } catch (err) {
      // A deployment it no longer sees (404) is a right taken away too; anything unexpected closes as well.
      why = errors.forbidden(`access revoked: ${isHttpError(err) ? err.message : 'checks failed'}`, 'ACCESS_REVOKED');
    }
    // Ended once, even when two changes in a row checked it twice; one that closed meanwhile is left alone.
    if (why && this.byUser.get(user)?.delete(connection)) connection.end(why);
  }
}
