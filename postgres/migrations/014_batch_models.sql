-- The live counts of each model in a batch whose lines name several (a base and its adapters, an inline batch
-- naming several): recorded at zero with the batch, added to by every commit under its shard's model as the
-- batch's own counts are, so each model's usage and cost are its own. A batch of one model has no rows here.
CREATE TABLE batch_models (
  batch_id text NOT NULL REFERENCES batches (id) ON DELETE CASCADE,
  model text NOT NULL,
  ord int NOT NULL,
  total bigint NOT NULL,
  completed bigint NOT NULL DEFAULT 0,
  failed bigint NOT NULL DEFAULT 0,
  input_tokens bigint NOT NULL DEFAULT 0,
  cached_tokens bigint NOT NULL DEFAULT 0,
  output_tokens bigint NOT NULL DEFAULT 0,
  cached_lines bigint NOT NULL DEFAULT 0,
  cached_output_tokens bigint NOT NULL DEFAULT 0,
  spot_seconds double precision NOT NULL DEFAULT 0,
  dedicated_seconds double precision NOT NULL DEFAULT 0,
  PRIMARY KEY (batch_id, model)
);
