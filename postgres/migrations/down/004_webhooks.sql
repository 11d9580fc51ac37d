-- Reverts 004_webhooks: events not yet delivered are lost.
DROP INDEX IF EXISTS batches_webhook_due;
ALTER TABLE batches DROP COLUMN webhook;
