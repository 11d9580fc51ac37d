// Webhooks for batches that end, as OpenAI sends them: `batch.completed`, `batch.failed`, `batch.expired` and
// `batch.cancelled`, each `{id: "evt_…", object: "event", type, created_at, data: {id}}`, signed by the Standard
// Webhooks scheme (`webhook-id`, `webhook-timestamp`, `webhook-signature: v1,<base64 HMAC-SHA256 of id.timestamp.body>`).
// The event is written into the batch's row with its final status (the outbox); the maintenance's holder delivers it
// at least once, retrying with backoff under the same event id until a 2xx or WEBHOOK_RETRY_SECONDS.
import { createHmac } from "node:crypto";
import type pino from "pino";
import type { WebhookEndpoint } from "../config/config.js";
import type { Batch } from "../domain/objects.js";
import type { Owner } from "../domain/ports.js";
import type { BatchMetrics } from "../metrics/metrics.js";
import { hexId } from "../openai/ids.js";
import type { BatchRecords, WebhookState } from "../state/ports.js";

/** Where an owner's events go: its API key's endpoint, else the deployment's; undefined when webhooks are off for it. */
export type WebhookTargets = (owner: Owner) => WebhookEndpoint | undefined;

const TYPES = {
  completed: "batch.completed",
  failed: "batch.failed",
  expired: "batch.expired",
  cancelled: "batch.cancelled",
} as const;

/** The event of a batch that just took its final status, or undefined when its owner has no endpoint. */
export function webhookEvent(batch: Batch, owner: Owner, targets: WebhookTargets | undefined, now: number): WebhookState | undefined {
  const target = targets?.(owner);
  const type = TYPES[batch.status as keyof typeof TYPES];
  if (!target || !type) return undefined;
  return {
    event_id: `evt_${hexId()}`,
    type,
    created_at: now,
    url: target.url,
    attempts: 0,
    next_at: now,
    delivered_at: null,
    gave_up: false,
    last_status: null,
    last_error: null,
  };
}

/** The Standard Webhooks signature header's value for one delivery. */
export function webhookSignature(key: Buffer, id: string, timestamp: number, body: string): string {
  return `v1,${createHmac("sha256", key).update(`${id}.${timestamp}.${body}`).digest("base64")}`;
}

/** Seconds before attempt n+1 after n failures: 1, 2, 4, … at most 10 minutes. */
export const retryDelaySeconds = (failures: number) => Math.min(600, 2 ** Math.max(0, failures - 1));

const DELIVERY_TIMEOUT_MS = 10_000;
const AT_ONCE = 8;

export interface WebhookSenderDeps {
  batches: BatchRecords;
  targets: WebhookTargets;
  retrySeconds: number;
  logger: pino.Logger;
  now: () => number;
  metrics?: BatchMetrics;
}

/** Delivers due events, a few at once, each at most once at a time in this process. */
export class WebhookSender {
  private readonly inFlight = new Map<string, Promise<void>>();

  constructor(private readonly deps: WebhookSenderDeps) {}

  /** Starts the deliveries that are due; does not wait for them (a slow receiver must not hold up housekeeping). */
  async startDue(): Promise<void> {
    const room = AT_ONCE - this.inFlight.size;
    if (room <= 0) return;
    const due = await this.deps.batches.webhooksDue(this.deps.now(), room + this.inFlight.size);
    for (const d of due) {
      if (this.inFlight.size >= AT_ONCE) break;
      if (this.inFlight.has(d.id)) continue;
      const p = this.deliver(d.id, d.owner, d.webhook)
        // The outcome could not be recorded (the lease moved, the database went away): the event stays due.
        .catch((err) => this.deps.logger.warn({ batch_id: d.id, err: (err as Error).message }, "webhook outcome not recorded"))
        .finally(() => this.inFlight.delete(d.id));
      this.inFlight.set(d.id, p);
    }
  }

  /** Lets the deliveries under way finish (each is bounded by its timeout). */
  async close(): Promise<void> {
    await Promise.allSettled([...this.inFlight.values()]);
  }

  private async deliver(batchId: string, owner: Owner, w: WebhookState): Promise<void> {
    const { now, logger, metrics } = this.deps;
    const target = this.deps.targets(owner);
    const next: WebhookState = { ...w, attempts: w.attempts + 1 };
    if (!target) {
      next.gave_up = true;
      next.last_error = "webhooks are no longer configured for this batch's owner";
      await this.deps.batches.setWebhook(batchId, next);
      return;
    }
    next.url = target.url;
    const body = JSON.stringify({ id: w.event_id, object: "event", type: w.type, created_at: w.created_at, data: { id: batchId } });
    const timestamp = now();
    try {
      const res = await fetch(target.url, {
        method: "POST",
        headers: {
          "content-type": "application/json",
          "user-agent": "offline-batch-inference-webhooks",
          "webhook-id": w.event_id,
          "webhook-timestamp": String(timestamp),
          "webhook-signature": webhookSignature(target.key, w.event_id, timestamp, body),
        },
        body,
        redirect: "manual",
        signal: AbortSignal.timeout(DELIVERY_TIMEOUT_MS),
      });
      await res.body?.cancel().catch(() => undefined);
      next.last_status = res.status;
      next.last_error = res.ok ? null : `answered ${res.status}`;
      if (res.ok) next.delivered_at = now();
    } catch (err) {
      next.last_status = null;
      next.last_error =
        (err as Error).name === "TimeoutError" ? "no answer in 10 s" : String((err as Error).cause ?? (err as Error).message);
    }
    if (next.delivered_at === null) {
      next.next_at = now() + retryDelaySeconds(next.attempts);
      next.gave_up = next.next_at - w.created_at > this.deps.retrySeconds;
    }
    await this.deps.batches.setWebhook(batchId, next);
    const outcome = next.delivered_at !== null ? "delivered" : next.gave_up ? "gave_up" : "failed";
    metrics?.webhookAttempt(outcome);
    const fields = { batch_id: batchId, event_id: w.event_id, type: w.type, attempt: next.attempts, status: next.last_status };
    if (outcome === "delivered") logger.info(fields, "webhook delivered");
    else if (outcome === "gave_up") logger.error({ ...fields, error: next.last_error }, "webhook given up");
    else logger.warn({ ...fields, error: next.last_error, retry_in_seconds: next.next_at - now() }, "webhook delivery failed");
  }
}
