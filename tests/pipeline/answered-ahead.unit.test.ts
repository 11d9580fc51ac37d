// The reader that answers remembered lines ahead of the pipeline (pipeline/answered-ahead.ts): each line looked up
// once whichever side reaches it first, the pipeline given exactly the lines not answered, a reader that gives up on
// a file the cache barely knows, what it says once through the file, a stop that ends the lookups, and a failed
// answer that fails the run.
import { describe, expect, it } from "vitest";
import { AnsweredAhead } from "../../pipeline/answered-ahead.js";

type Line = { lineNo: number };
const lines = (n: number): Line[] => Array.from({ length: n }, (_, i) => ({ lineNo: i + 1 }));

async function* slowly(ls: Line[], everyMs = 0): AsyncGenerator<Line> {
  for (const l of ls) {
    if (everyMs) await new Promise((r) => setTimeout(r, everyMs));
    yield l;
  }
}

async function collect(g: AsyncIterable<Line>): Promise<number[]> {
  const out: number[] = [];
  for await (const l of g) out.push(l.lineNo);
  return out;
}

describe("AnsweredAhead", () => {
  it("gives the pipeline exactly the lines not answered, each looked up once, in the pipeline's order", async () => {
    const asked = new Map<number, number>();
    const answered: number[] = [];
    const ahead = new AnsweredAhead<Line>(
      async (l) => {
        asked.set(l.lineNo, (asked.get(l.lineNo) ?? 0) + 1);
        const hit = l.lineNo % 3 === 0;
        if (hit) answered.push(l.lineNo);
        return hit;
      },
      () => false,
    );
    const all = lines(300);
    // The reader in the file's order, the pipeline in another (reversed), both at once.
    ahead.start(slowly(all));
    const toRun = await collect(ahead.toRun(slowly([...all].reverse())));
    await ahead.close();
    expect(toRun).toEqual([...all].reverse().flatMap((l) => (l.lineNo % 3 === 0 ? [] : [l.lineNo])));
    expect([...answered].sort((a, b) => a - b)).toEqual(all.filter((l) => l.lineNo % 3 === 0).map((l) => l.lineNo));
    expect([...asked.values()].every((n) => n === 1)).toBe(true);
    expect(asked.size).toBe(300);
  });

  it("gives up reading ahead of a file the cache barely knows: the pipeline gets every line, the rest not looked up here", async () => {
    const asked: number[] = [];
    const ahead = new AnsweredAhead<Line>(
      async (l) => {
        asked.push(l.lineNo);
        return l.lineNo === 7;
      },
      () => false,
    );
    const all = lines(1000);
    ahead.start(slowly(all));
    await ahead.readThrough();
    expect(ahead.answeredAll()).toBe(false);
    // Four chunks of 64 looked up, one answer among them: the reader stopped there.
    expect(asked).toHaveLength(256);
    const toRun = await collect(ahead.toRun(slowly(all)));
    await ahead.close();
    expect(toRun).toEqual(all.filter((l) => l.lineNo !== 7).map((l) => l.lineNo));
    expect(asked).toHaveLength(256);
  });

  it("reads on where the cache knows a file, even after a first stretch of new lines", async () => {
    let asked = 0;
    const ahead = new AnsweredAhead<Line>(
      async (l) => {
        asked++;
        return l.lineNo > 100;
      },
      () => false,
    );
    const all = lines(1000);
    ahead.start(slowly(all));
    const toRun = await collect(ahead.toRun(slowly(all)));
    await ahead.close();
    expect(toRun).toEqual(all.slice(0, 100).map((l) => l.lineNo));
    expect(asked).toBe(1000);
  });

  it("answers lines the pipeline has not reached: the reader runs ahead of a pipeline that is not pulling", async () => {
    const answered: number[] = [];
    const ahead = new AnsweredAhead<Line>(
      async (l) => {
        answered.push(l.lineNo);
        return true;
      },
      () => false,
    );
    ahead.start(slowly(lines(500)));
    for (let i = 0; answered.length < 500 && i < 2000; i++) await new Promise((r) => setTimeout(r, 1));
    expect(answered).toHaveLength(500);
    await ahead.close();
  });

  it("says once through the file whether it answered every line, and which it answered", async () => {
    const through = async (hit: (n: number) => boolean, stopAt = Number.POSITIVE_INFINITY) => {
      let stop = false;
      const ahead = new AnsweredAhead<Line>(
        async (l) => {
          if (l.lineNo >= stopAt) stop = true;
          return hit(l.lineNo);
        },
        () => stop,
      );
      ahead.start(slowly(lines(200)));
      await ahead.readThrough();
      const answered = lines(200).filter((l) => ahead.isAnswered(l.lineNo)).length;
      await ahead.close();
      return { all: ahead.answeredAll(), answered };
    };
    expect(await through(() => true)).toEqual({ all: true, answered: 200 });
    expect(await through((n) => n !== 150)).toEqual({ all: false, answered: 199 });
    // A reader stopped before the end did not answer every line, whatever it found.
    expect((await through(() => true, 100)).all).toBe(false);
  });

  it("looks nothing up once the run stopped: the pipeline gets the rest to end as it ends them", async () => {
    let stop = false;
    const answered: number[] = [];
    const ahead = new AnsweredAhead<Line>(
      async (l) => {
        answered.push(l.lineNo);
        if (l.lineNo === 10) stop = true;
        return true;
      },
      () => stop,
    );
    const toRun = await collect(ahead.toRun(slowly(lines(50))));
    await ahead.close();
    expect(answered).toEqual(lines(10).map((l) => l.lineNo));
    expect(toRun).toEqual(
      lines(50)
        .slice(10)
        .map((l) => l.lineNo),
    );
  });

  it("fails the run when an answer cannot be written, from the pipeline's side and from close", async () => {
    const ahead = new AnsweredAhead<Line>(
      async (l) => {
        if (l.lineNo === 70) throw new Error("disk full");
        return true;
      },
      () => false,
    );
    ahead.start(slowly(lines(200)));
    await expect(collect(ahead.toRun(slowly(lines(200), 1)))).rejects.toThrow("disk full");
    await expect(ahead.close()).rejects.toThrow("disk full");
  });
});
