// Prelude of documentation fragments (`<!-- doc-test: prelude service -->`, test/docs/doc-blocks.ts):
// what they use without defining it. Inline type imports only, so a fragment may import any name.
/* eslint-disable @typescript-eslint/no-unused-vars */
export {};
declare const redlock: import('nestjs-redlock').RedlockService;
declare const store: import('ioredis').Redis;
declare function render(): Promise<string>;
declare function transfer(): Promise<void>;
declare function importBatch(batch: string[], fencingToken: number | undefined): Promise<void>;
declare const batches: string[][];
declare const queue: { add(name: string, data: unknown): Promise<unknown> };
declare const job: { data: { lock: string } };
