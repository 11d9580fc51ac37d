-- Reverts 012_result_cache_blobs: the answers kept as objects are forgotten (their objects stay, under result-cache/).
DELETE FROM result_cache WHERE answer IS NULL;
UPDATE result_cache_totals SET entries = (SELECT count(*) FROM result_cache), bytes = (SELECT coalesce(sum(bytes), 0) FROM result_cache);
ALTER TABLE result_cache DROP COLUMN blob_sum;
ALTER TABLE result_cache DROP COLUMN blob_key;
ALTER TABLE result_cache ALTER COLUMN answer SET NOT NULL;
