-- Lines answered without running (a repeat of another line, a result cache hit) and their answers' output tokens,
-- added by every commit as the other counts are: the batch's cached_lines, and what its cost does not charge.
ALTER TABLE batches
  ADD COLUMN cached_lines bigint NOT NULL DEFAULT 0,
  ADD COLUMN cached_output_tokens bigint NOT NULL DEFAULT 0;
ALTER TABLE shards
  ADD COLUMN cached_lines bigint NOT NULL DEFAULT 0,
  ADD COLUMN cached_output_tokens bigint NOT NULL DEFAULT 0;
