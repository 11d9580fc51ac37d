// A run's remembered lines answered ahead of the pipeline: a reader goes through the whole file once, a chunk's
// lookups at a time, and writes each line the result cache holds as it finds it, however busy the backend is. The
// pipeline plans the other lines once the reader is through (a re-run answered whole plans and reads nothing more);
// a line it reaches first is looked up then. Each line is looked up once, by whichever of the two reaches it first,
// so none is both answered and run. A file the cache barely knows is not read ahead: once the reader has looked up
// a few chunks and found almost nothing, it gives up, and the pipeline starts; the backend still looks each line up
// as it runs it (cache/caching-backend.ts), so a remembered line met later is answered all the same.
import { setImmediate as nextTurn } from "node:timers/promises";

/** Lines looked up together: a store across a network answers them at once, not in turn. */
const LOOKUP_CHUNK = 64;
/**
 * The reader gives up after this many lookups where fewer than one in GIVE_UP_SHARE found an answer: reading on would
 * hold the pipeline's start for a lookup of every line, which the backend makes again as it runs each.
 */
const GIVE_UP_AFTER = 4 * LOOKUP_CHUNK;
const GIVE_UP_SHARE = 16;

const UNSEEN = 0;
const PENDING = 1;
const ANSWERED = 2;
const MISSED = 3;

export class AnsweredAhead<L extends { lineNo: number }> {
  /** Each line's state by its number: a byte a line, so a file of millions costs megabytes. */
  private states = new Uint8Array(1024);
  private readonly pending = new Map<number, Promise<boolean>>();
  private reading: Promise<void> = Promise.resolve();
  private closing = false;
  /** The reader went through the whole file and answered every line of it. */
  private answeredEvery = false;
  /** The reader stopped early, finding too few answers: the lines it did not reach are not looked up here. */
  private gaveUp = false;
  private failure: { error: unknown } | undefined;

  /**
   * `answer` writes the line's answer where the cache holds it (true), else does nothing (false); after `stopped`
   * says the run stopped, no line is looked up any more.
   */
  constructor(
    private readonly answer: (line: L) => Promise<boolean>,
    private readonly stopped: () => boolean,
  ) {}

  /** Starts the reader over the file's lines, in any order (the file's own: the cheapest to read). */
  start(lines: AsyncIterable<L>): void {
    this.reading = this.read(lines).catch((error) => {
      this.failure ??= { error };
    });
  }

  /** The pipeline's lines (`lines`, in their planned order) without those answered from the cache. */
  async *toRun(lines: AsyncIterable<L>): AsyncGenerator<L> {
    for await (const line of lines) {
      if (this.failure) throw this.failure.error;
      if (!(await this.answered(line))) yield line;
    }
    await this.reading;
    if (this.failure) throw this.failure.error;
  }

  /** Settles once the reader has been through the file (or stopped); a failure is told by toRun and close. */
  readThrough(): Promise<void> {
    return this.reading;
  }

  /** Whether the reader, through the file, answered every line: none is left to run. */
  answeredAll(): boolean {
    return this.answeredEvery;
  }

  /** Whether the line was answered from the cache already (a line not looked up yet is not). */
  isAnswered(lineNo: number): boolean {
    return this.stateOf(lineNo) === ANSWERED;
  }

  /** Stops the reader and waits for the lookups under way (their answers written), so the files may close. */
  async close(): Promise<void> {
    this.closing = true;
    await this.reading;
    await Promise.allSettled([...this.pending.values()]);
    if (this.failure) throw this.failure.error;
  }

  /** Whether the line was answered from the cache: looked up now if the reader has not reached it. */
  private answered(line: L): Promise<boolean> {
    const state = this.stateOf(line.lineNo);
    if (state === ANSWERED) return Promise.resolve(true);
    if (state === MISSED || (state === UNSEEN && this.gaveUp)) return Promise.resolve(false);
    return state === PENDING ? this.pending.get(line.lineNo)! : this.lookUp(line);
  }

  private lookUp(line: L): Promise<boolean> {
    const n = line.lineNo;
    this.setState(n, PENDING);
    const settle = (state: number) => {
      this.setState(n, state);
      this.pending.delete(n);
    };
    const asked = this.stopped() ? Promise.resolve(false) : this.answer(line);
    // A lookup that failed (its answer could not be written) leaves the line unanswered; the failure fails the run.
    const found = asked.then(
      (hit) => {
        settle(hit ? ANSWERED : MISSED);
        return hit;
      },
      (err) => {
        settle(MISSED);
        throw err;
      },
    );
    this.pending.set(n, found);
    return found;
  }

  private async read(lines: AsyncIterable<L>): Promise<void> {
    let chunk: Promise<boolean>[] = [];
    let all = true;
    const found = { lookups: 0, answers: 0 };
    for await (const line of lines) {
      if (this.closing || this.stopped() || this.failure) {
        all = false;
        break;
      }
      const state = this.stateOf(line.lineNo);
      if (state !== UNSEEN) {
        all &&= state !== MISSED;
        continue;
      }
      chunk.push(this.lookUp(line));
      if (chunk.length < LOOKUP_CHUNK) continue;
      const hits = await Promise.all(chunk);
      all = hits.every(Boolean) && all;
      chunk = [];
      found.lookups += hits.length;
      found.answers += hits.filter(Boolean).length;
      if (found.lookups >= GIVE_UP_AFTER && found.answers * GIVE_UP_SHARE < found.lookups) {
        this.gaveUp = true;
        all = false;
        break;
      }
      // The backend's callbacks and the pipeline's lines get their turn between chunks.
      await nextTurn();
    }
    this.answeredEvery = (await Promise.all(chunk)).every(Boolean) && all;
  }

  private stateOf(n: number): number {
    return n < this.states.length ? this.states[n] : UNSEEN;
  }

  private setState(n: number, state: number): void {
    if (n >= this.states.length) {
      const grown = new Uint8Array(Math.max(n + 1, this.states.length * 2));
      grown.set(this.states);
      this.states = grown;
    }
    this.states[n] = state;
  }
}
