// The plan of a batch, told before it is created (POST /v1/batches/plan, the runner's --plan): what it asks of the
// engine, what the result cache answers, when it would end behind the queue, and what it would cost.
import { extendZodWithOpenApi } from "@asteasolutions/zod-to-openapi";
import { z } from "zod";

extendZodWithOpenApi(z);

const count = z.number().int().min(0);

export const BatchPlanSchema = z
  .object({
    object: z.literal("batch.plan"),
    model: z.string().openapi({ description: "The model that would serve the batch." }),
    lines: count.openapi({ description: "Requests in the file." }),
    invalid_lines: count.openapi({ description: "Lines whose body would fail when it runs (an error line each): not counted below." }),
    distinct_requests: count.openapi({
      description: "Requests left once repeats of a deterministic request are one (the result cache's rule, docs/cache.md).",
    }),
    cached_lines: count.openapi({
      description: "Lines answered without running: repeats, and answers the cache holds now for this key. 0 with the cache off.",
    }),
    input_tokens: count.openapi({
      description: "Prompt tokens of every line, by the model's tokenizer as the engine renders them (chat template included).",
    }),
    max_output_tokens: count.openapi({ description: "The most every line may generate: its bound, or the endpoint's default." }),
    shared_prefix_tokens: count.openapi({ description: "Prompt tokens the engine's prefix sharing would spare (an estimate)." }),
    tokenizer: z.enum(["model", "estimate"]).openapi({
      description: "`model`: every prompt counted by the model's tokenizer; `estimate`: some by characters (the model is not loaded here).",
    }),
    projected_seconds: count.openapi({ description: "Seconds to its end: the queue ahead of it and its own distinct work." }),
    projected_finish_at: count.openapi({ description: "Unix seconds it would end if created now." }),
    deadline_at_risk: z.boolean().openapi({ description: "Whether the projected finish falls after the completion window." }),
    throughput: z.object({
      work_per_second: z.number().openapi({ description: "Generated-token equivalents per second (a prompt token is 1/8 of one)." }),
      measured_batches: count.openapi({ description: "Finished batches of the model it was measured from; 0: the default rate." }),
    }),
    queue_ahead: z
      .object({ batches: count, lines: count })
      .openapi({ description: "Batches of the model queued or running, and their lines not yet done." }),
    projected_cost: z
      .object({ currency: z.string(), amount: z.number(), basis: z.enum(["tokens", "pool_hours"]) })
      .nullable()
      .openapi({ description: "At the model's price (cached lines at the cached-input price and no output); null without a price." }),
  })
  .openapi("BatchPlan", {
    description: "What a batch would ask, computed without queueing or running anything.",
  });

export type BatchPlan = z.infer<typeof BatchPlanSchema>;
