/**
 * Redaction of secrets in anything the agent shows back: plans, audit details, logs.
 * A value is secret when its schema says `writeOnly`, or its key looks like one.
 */
export declare const REDACTED = "[redacted]";
export declare const isSecretKey: (key: string) => boolean;
/** Copies `value`, replacing every secret-looking key's value. */
export declare function redactDeep(value: unknown, depth?: number): unknown;
interface SchemaLike {
    type?: unknown;
    properties?: Record<string, SchemaLike>;
    items?: SchemaLike;
    writeOnly?: boolean;
    anyOf?: SchemaLike[];
    oneOf?: SchemaLike[];
}
/** Redacts what the schema marks `writeOnly`, then anything that looks secret. */
export declare function redactBySchema(value: unknown, schema: SchemaLike | undefined): unknown;
export {};
//# sourceMappingURL=redact.d.ts.map