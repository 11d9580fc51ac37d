// A dataset batch created over HTTP (POST /v1/dataset_batches) as a client sends one, for the tests that drive it.

/** Creates a completions batch from `input` by `job`; `signal` hangs up as a client that goes away does. */
export async function createFromDataset(
  base: string,
  input: string,
  job: Record<string, unknown>,
  signal?: AbortSignal,
): Promise<{ status: number; body: any }> {
  const res = await fetch(`${base}/v1/dataset_batches`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ input_file_id: input, endpoint: "/v1/completions", completion_window: "24h", job }),
    signal,
  });
  return { status: res.status, body: await res.json() };
}
