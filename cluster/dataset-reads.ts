// How many dataset reads (a create from a dataset, a table's download) run at once in this process: each holds a
// process of its own (dataset-read-processes.ts), its memory and its scratch disk, over a client's SQL. Room for so
// many, then a bounded FIFO queue; a read past both is refused at once with a Retry-After, never left to wait unseen.
import { UnavailableError } from "../domain/errors.js";

/** Reads waiting per one running: a few creates at once wait their turn, a flood is refused. */
const QUEUE_PER_ROOM = 4;
const RETRY_AFTER_SECONDS = 10;

export class DatasetReads {
  private running = 0;
  private readonly queue: Array<() => void> = [];

  constructor(private readonly room: number) {}

  /** `read` once there is room for it; refused (429) when the queue is full too. */
  async run<T>(read: () => Promise<T>): Promise<T> {
    await this.enter();
    try {
      return await read();
    } finally {
      this.leave();
    }
  }

  private enter(): Promise<void> {
    if (this.running < this.room && this.queue.length === 0) {
      this.running++;
      return Promise.resolve();
    }
    if (this.queue.length >= QUEUE_PER_ROOM * this.room)
      return Promise.reject(
        new UnavailableError(
          `Too many dataset reads are running or waiting on this server right now; retry after ${RETRY_AFTER_SECONDS} s.`,
          "resource_unavailable",
          RETRY_AFTER_SECONDS,
        ),
      );
    return new Promise<void>((resolve) =>
      this.queue.push(() => {
        this.running++;
        resolve();
      }),
    );
  }

  private leave(): void {
    this.running--;
    while (this.running < this.room && this.queue.length > 0) this.queue.shift()!();
  }
}
