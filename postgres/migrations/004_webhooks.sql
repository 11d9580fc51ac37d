-- Webhooks: a batch's event waits for delivery in the batch's own row, written in the same update that gives
-- the batch its final status, so a crash between the two cannot lose it (an outbox of one per batch).
ALTER TABLE batches ADD COLUMN webhook jsonb;
CREATE INDEX batches_webhook_due ON batches (((webhook->>'next_at')::bigint))
  WHERE webhook IS NOT NULL AND webhook->>'delivered_at' IS NULL AND NOT (webhook->>'gave_up')::boolean;
