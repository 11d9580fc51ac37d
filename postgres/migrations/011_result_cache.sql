-- The result cache shared by every worker: answers by scope and key, each sealed with its checksum, in least recently
-- used order (used_seq), with the totals the byte bound is kept by, updated in the same transactions.
CREATE TABLE result_cache (
  scope text NOT NULL,
  key text NOT NULL,
  bytes bigint NOT NULL,
  stored_at bigint NOT NULL,
  used_seq bigint NOT NULL,
  answer bytea NOT NULL,
  PRIMARY KEY (scope, key)
);
CREATE INDEX result_cache_lru ON result_cache (used_seq);
CREATE SEQUENCE result_cache_seq;
CREATE TABLE result_cache_totals (
  id int PRIMARY KEY CHECK (id = 1),
  entries bigint NOT NULL,
  bytes bigint NOT NULL
);
INSERT INTO result_cache_totals VALUES (1, 0, 0);
