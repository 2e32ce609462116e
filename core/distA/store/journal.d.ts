import Database from 'better-sqlite3';
export type Journal = Database.Database;
export declare function openJournal(path: string): Journal;
//# sourceMappingURL=journal.d.ts.map