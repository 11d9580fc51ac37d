-- Many keys on one deployment: each open batch's estimated tokens by model (what its key has enqueued, counted
-- against the key's limits while the batch is open), the keys' fair-share clocks, and the usage of batches that
-- ended, kept when a batch is deleted.
ALTER TABLE batches ADD COLUMN enqueued jsonb;
CREATE INDEX batches_open_by_owner ON batches (owner) WHERE status IN ('validating', 'in_progress', 'finalizing', 'cancelling');

-- Start-time fair queuing between keys: each key's virtual time (shards claimed over its weight), and the clock
-- (the start tag of the latest claim), so a key back from idle starts level with the others, not with credit.
CREATE TABLE key_shares (
  owner text PRIMARY KEY,
  vtime double precision NOT NULL DEFAULT 0
);
CREATE TABLE share_clock (
  id boolean PRIMARY KEY DEFAULT true CHECK (id),
  v double precision NOT NULL DEFAULT 0
);
INSERT INTO share_clock (id, v) VALUES (true, 0);

-- A deleted batch's usage (domain/usage.ts's record); the usage of batches still kept is read from them.
CREATE TABLE usage_archive (
  batch_id text PRIMARY KEY,
  ended_at bigint NOT NULL,
  record jsonb NOT NULL
);
CREATE INDEX usage_archive_by_end ON usage_archive (ended_at);
CREATE INDEX batches_by_end ON batches ((coalesce((doc->>'completed_at')::bigint, (doc->>'failed_at')::bigint,
  (doc->>'expired_at')::bigint, (doc->>'cancelled_at')::bigint)))
  WHERE status IN ('completed', 'failed', 'expired', 'cancelled');
