-- Reverts 002_shard_usage.
ALTER TABLE shards DROP COLUMN input_tokens, DROP COLUMN cached_tokens, DROP COLUMN output_tokens;
