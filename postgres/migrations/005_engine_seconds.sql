-- Engine time by pool: the seconds a batch's shards held a slot of each pool, added by every commit (as its
-- counts are). A batch's cost is computed from them and its token counts with the model's price.
ALTER TABLE batches
  ADD COLUMN spot_seconds double precision NOT NULL DEFAULT 0,
  ADD COLUMN dedicated_seconds double precision NOT NULL DEFAULT 0;
