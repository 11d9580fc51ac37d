-- Reverts 007_keys: enqueued tokens, fair-share clocks and the usage of deleted batches are forgotten.
DROP INDEX batches_by_end;
DROP TABLE usage_archive;
DROP TABLE share_clock;
DROP TABLE key_shares;
DROP INDEX batches_open_by_owner;
ALTER TABLE batches DROP COLUMN enqueued;
