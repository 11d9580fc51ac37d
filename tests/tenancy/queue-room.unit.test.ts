// The queue's places shared between keys: alone a key may fill the queue; with others waiting it is refused at its
// share while places stay for them; a key with nothing queued always gets its one batch in.
import { describe, expect, it } from "vitest";
import { queueFull } from "../../domain/errors.js";
import { queueRoom } from "../../tenancy/fair-share.js";

const q = (entries: Record<string, number>) => new Map(Object.entries(entries));

describe("queueRoom", () => {
  it("lets a key alone fill the queue, and no further", () => {
    expect(queueRoom(q({ a: 19 }), "a", 20)).toEqual({ admit: true });
    expect(queueRoom(q({ a: 20 }), "a", 20)).toEqual({ admit: false, full: { held: 20, max: 20, keys: 1, others: 0 } });
    // The open API is one owner (null).
    expect(queueRoom(q({ "": 20 }), null, 20)).toEqual({ admit: false, full: { held: 20, max: 20, keys: 1, others: 0 } });
  });

  it("admits another key's one batch into a queue one key filled, and refuses the filler its share", () => {
    // The attack: A queued 20 of 20; B's one urgent batch still goes in.
    expect(queueRoom(q({ a: 20 }), "b", 20)).toEqual({ admit: true });
    expect(queueRoom(q({ a: 20, b: 1 }), "a", 20)).toEqual({ admit: false, share: { held: 20, max: 20, keys: 2 } });
    // B's next waits for room (past the bound by one already).
    expect(queueRoom(q({ a: 20, b: 1 }), "b", 20)).toEqual({ admit: false, full: { held: 1, max: 20, keys: 2, others: 20 } });
    // As A's batches start, the room goes to B, up to its share, not back to A.
    expect(queueRoom(q({ a: 15, b: 4 }), "b", 20)).toEqual({ admit: true });
    expect(queueRoom(q({ a: 15, b: 4 }), "a", 20)).toEqual({ admit: false, share: { held: 15, max: 20, keys: 2 } });
    expect(queueRoom(q({ a: 9, b: 10 }), "b", 20)).toEqual({ admit: false, share: { held: 10, max: 20, keys: 2 } });
    expect(queueRoom(q({ a: 9, b: 10 }), "a", 20)).toEqual({ admit: true });
  });

  it("splits the places among every key waiting, each counted once", () => {
    expect(queueRoom(q({ a: 7, b: 6, c: 0 }), "c", 20)).toEqual({ admit: true });
    expect(queueRoom(q({ a: 7, b: 6, c: 6 }), "c", 20)).toEqual({ admit: true });
    expect(queueRoom(q({ a: 7, b: 6, c: 7 }), "c", 20)).toEqual({ admit: false, share: { held: 7, max: 20, keys: 3 } });
    // Under its share, a key still waits for a free place.
    expect(queueRoom(q({ a: 8, b: 6, c: 6 }), "b", 20)).toEqual({ admit: false, full: { held: 6, max: 20, keys: 3, others: 14 } });
  });

  it("says why a key under its share finds the queue full: whose batches fill it, by the share rule", () => {
    const room = queueRoom(q({ a: 20, b: 1 }), "b", 20);
    expect(queueFull(30, room.share, room.full).message).toBe(
      "The batch queue is full: of its 20 places, this key's batches hold 1, under its share of 10 while 2 keys have batches " +
        "waiting, and other keys' batches hold 20. A key at its share is refused more while others wait, so a place freed " +
        "(a batch starting) goes to a key under its share, this one among them: retry shortly.",
    );
    const alone = queueRoom(q({ a: 20 }), "a", 20);
    expect(queueFull(30, alone.share, alone.full).message).toMatch(/^The batch queue is full: this key's own 20 batches waiting/);
  });
});
