// The system tier's global setup: the product compiled once for the processes its tests start (testkit/entry.ts).
import { buildForTests } from "./entry.js";

export default async function setup(): Promise<void> {
  await buildForTests();
}
