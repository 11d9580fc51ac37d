-- What each shard's commits added to its batch, tokens included (completed and failed were there): a worker that
-- finds more results in a shard's files than were counted (a run that wrote lines and died before committing
-- them) adds only the difference.
ALTER TABLE shards
  ADD COLUMN input_tokens bigint NOT NULL DEFAULT 0,
  ADD COLUMN cached_tokens bigint NOT NULL DEFAULT 0,
  ADD COLUMN output_tokens bigint NOT NULL DEFAULT 0;
