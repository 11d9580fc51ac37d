-- Reverts 010_worker_catalogue: API servers then need MODEL_PATH or MODELS_FILE to name batches.
ALTER TABLE workers DROP COLUMN catalogue;
