-- Reverts 012_cached_lines: batches and shards lose their count of lines answered without running.
ALTER TABLE batches DROP COLUMN cached_lines, DROP COLUMN cached_output_tokens;
ALTER TABLE shards DROP COLUMN cached_lines, DROP COLUMN cached_output_tokens;
