// Child process for the kill -9 test in resume.sys.test.ts: appends numbered lines until killed.
import { openJsonlAppender } from "../../pipeline/jsonl.js";

const path = process.argv[2];
const out = await openJsonlAppender(path);
const pad = "p".repeat(3000);
for (let i = 0; ; i++) {
  await out.append({ i, pad });
  if (i === 200) process.stdout.write("ready\n");
}
