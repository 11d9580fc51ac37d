-- Reverts 005_engine_seconds: batches lose their engine time (and so their cost by pool hours).
ALTER TABLE batches DROP COLUMN spot_seconds, DROP COLUMN dedicated_seconds;
