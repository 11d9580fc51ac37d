-- Reverts 014_batch_models: a batch over several models keeps only its own counts (its usage under its first model).
DROP TABLE batch_models;
