/** A problem with how the CLI was called: exit code 2, nothing was sent. */
export class UsageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UsageError';
  }
}
