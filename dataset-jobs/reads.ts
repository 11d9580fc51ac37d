// How many dataset reads (a create from a dataset, a table's download) run at once in this process: each holds a
// process of its own (dataset-read-processes.ts), its memory and its scratch disk, over a client's SQL. Room for so
// many, then a bounded queue taken in turn by key (one key's many creates never hold back another key's); a read
// past both is refused at once with a Retry-After, never left to wait unseen, and a read whose client has gone
// leaves the queue at once.
import { UnavailableError } from "../domain/errors.js";

/** Reads waiting per one running: a few creates at once wait their turn, a flood is refused. */
const QUEUE_PER_ROOM = 4;
const RETRY_AFTER_SECONDS = 10;

export interface ReadTurn {
  /** Whose read it is (the API key's owner): the queue serves its keys in turn. */
  key?: string;
  /** Aborted when the read's client has gone: a waiting read leaves the queue, rejected with the signal's reason. */
  signal?: AbortSignal;
}

export class DatasetReads {
  private running = 0;
  private waiting = 0;
  /** The waiting reads by key, in the order the keys take their turns (a Map keeps insertion order). */
  private readonly queues = new Map<string, Array<() => void>>();

  constructor(private readonly room: number) {}

  /** `read` once there is room for it and its key's turn has come; refused (429) when the queue is full too. */
  async run<T>(read: () => Promise<T>, turn: ReadTurn = {}): Promise<T> {
    await this.enter(turn.key ?? "", turn.signal);
    try {
      return await read();
    } finally {
      this.leave();
    }
  }

  private enter(key: string, signal: AbortSignal | undefined): Promise<void> {
    signal?.throwIfAborted();
    if (this.running < this.room && this.waiting === 0) {
      this.running++;
      return Promise.resolve();
    }
    if (this.waiting >= QUEUE_PER_ROOM * this.room)
      return Promise.reject(
        new UnavailableError(
          `Too many dataset reads are running or waiting on this server right now; retry after ${RETRY_AFTER_SECONDS} s.`,
          "resource_unavailable",
          RETRY_AFTER_SECONDS,
        ),
      );
    return new Promise<void>((resolve, reject) => {
      const start = () => {
        signal?.removeEventListener("abort", gone);
        this.running++;
        resolve();
      };
      const gone = () => {
        const queue = this.queues.get(key);
        const at = queue?.indexOf(start) ?? -1;
        if (at < 0) return;
        queue!.splice(at, 1);
        if (queue!.length === 0) this.queues.delete(key);
        this.waiting--;
        reject(signal!.reason);
      };
      signal?.addEventListener("abort", gone, { once: true });
      const queue = this.queues.get(key) ?? [];
      queue.push(start);
      this.queues.set(key, queue);
      this.waiting++;
    });
  }

  private leave(): void {
    this.running--;
    while (this.running < this.room && this.waiting > 0) this.next()();
  }

  /** The first waiting read of the key whose turn it is; that key then goes to the back of the turns. */
  private next(): () => void {
    const [key, queue] = this.queues.entries().next().value as [string, Array<() => void>];
    this.queues.delete(key);
    const start = queue.shift()!;
    if (queue.length > 0) this.queues.set(key, queue);
    this.waiting--;
    return start;
  }
}
