// Signals between the parts of one process (what LISTEN/NOTIFY carries between processes), and the maintenance
// lock among them. Events are delivered after the publisher's step, as a notification arrives after its commit.
import type { ClusterEvent, EventBus, LeaderLock } from "../state/ports.js";
import type { MemoryState } from "./state.js";

export class MemoryEventBus implements EventBus {
  constructor(private readonly state: MemoryState) {}

  async publish(event: ClusterEvent): Promise<void> {
    const copy = structuredClone(event);
    for (const l of this.state.listeners) queueMicrotask(() => l(copy));
  }

  subscribe(onEvent: (e: ClusterEvent) => void): { close(): Promise<void> } {
    this.state.listeners.add(onEvent);
    return { close: async () => void this.state.listeners.delete(onEvent) };
  }
}

/** Held by one holder of the state at a time, until it releases it. */
export class MemoryLeaderLock implements LeaderLock {
  constructor(private readonly state: MemoryState) {}

  get held(): boolean {
    return this.state.leader === this;
  }

  async hold(): Promise<boolean> {
    this.state.leader ??= this;
    return this.held;
  }

  async release(): Promise<void> {
    if (this.held) this.state.leader = null;
  }
}
