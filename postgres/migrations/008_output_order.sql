-- A batch's output order (cluster/output-order.ts): [[shard, lines of that shard through which], ...], extended as
-- its output is read while it runs and as it is finalized, so every read and the final file agree.
ALTER TABLE batches ADD COLUMN output_order jsonb NOT NULL DEFAULT '[]';
