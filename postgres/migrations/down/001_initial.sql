-- Reverts 001_initial: the whole schema (every batch, file and worker record is lost).
DROP TABLE IF EXISTS workers;
DROP TABLE IF EXISTS shards;
DROP TABLE IF EXISTS batches;
DROP TABLE IF EXISTS files;
