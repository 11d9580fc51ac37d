-- Large remembered answers live in the blob store (S3 in the distributed mode): the row keeps the object's key and
-- the sha256 of its bytes instead of the answer.
ALTER TABLE result_cache ALTER COLUMN answer DROP NOT NULL;
ALTER TABLE result_cache ADD COLUMN blob_key text;
ALTER TABLE result_cache ADD COLUMN blob_sum bytea;
