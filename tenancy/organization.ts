// The deployment as admin keys read it: usage and costs per key in OpenAI's shapes (domain/usage.ts) from the
// batches' records, and the keys with what each has enqueued.
import type { ModelRegistry } from "../backends/registry.js";
import type { KeyRing } from "../config/keys.js";
import type { Owner } from "../domain/ports.js";
import { type KeyView, type Organization, parseUsageQuery, type UsageKind, type UsagePage, usagePage } from "../domain/usage.js";
import type { BatchRecords } from "../state/ports.js";

export class ClusterOrganization implements Organization {
  constructor(private readonly deps: { batches: BatchRecords; keys: KeyRing; registry: ModelRegistry; now: () => number }) {}

  async usage(kind: UsageKind, query: Record<string, unknown>): Promise<UsagePage> {
    const q = parseUsageQuery(kind, query, this.deps.now());
    const records = await this.deps.batches.usage({ start: q.start, end: Math.min(q.end, q.start + q.limit * q.width) });
    return usagePage(records, q, (o) => this.keyId(o), this.deps.registry);
  }

  async keys(): Promise<KeyView[]> {
    const enqueued = await this.deps.batches.enqueued();
    return this.deps.keys.keys.map((k) => ({
      object: "organization.api_key",
      id: k.id,
      admin: k.admin,
      weight: k.weight,
      enqueued_token_limits: { ...k.limits },
      enqueued_tokens: Object.fromEntries(enqueued.filter((e) => e.owner === k.owner).map((e) => [e.model, e.tokens])),
    }));
  }

  keyId(owner: Owner): string | null {
    return this.deps.keys.idOf(owner);
  }

  ownerOf(keyId: string): Owner | undefined {
    return this.deps.keys.keys.find((k) => k.id === keyId)?.owner;
  }
}
