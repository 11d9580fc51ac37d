// Child process for lmdb-full-disk.sys.test.ts, run on a small tmpfs of its own: puts answers into the embedded
// result cache, many at once, until the disk is full, and prints how many of them settled (stored or refused).
import { LmdbResultCache } from "../../cache/lmdb-cache.js";

const dir = process.argv[2];
const cache = new LmdbResultCache(dir, { maxBytes: 1 << 30, ttlSeconds: 0 });
const answer = (i: number) => ({
  body: { text: `answer ${i} `.repeat(400) },
  usage: { promptTokens: 10, completionTokens: 5, cachedTokens: 0 },
});
let stored = 0;
let refused = 0;
let pending = 0;
// One put every few milliseconds, none waiting for another: each commit is followed by the next write at once, as a
// batch's lines store their answers, so a put that waits for its flush sees later writes start (and, once the disk
// is full, fail).
for (let i = 0; i < 320; i++) {
  pending++;
  cache
    .put("key", `k${i}`, answer(i))
    .then(
      () => void stored++,
      () => void refused++,
    )
    .finally(() => pending--);
  await new Promise((r) => setTimeout(r, 2));
}
const deadline = Date.now() + 20_000;
while (pending > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
console.log(JSON.stringify({ stored, refused, pending }));
process.exit(0);
