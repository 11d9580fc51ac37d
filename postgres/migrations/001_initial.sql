-- The distributed mode's shared state. Batch documents are OpenAI's Batch objects (jsonb); the columns beside
-- them are what other processes select, order and update on. Counts live in columns, added to by each shard
-- checkpoint in the same transaction that records its parts, so they are exact across workers.

CREATE TABLE files (
  id text PRIMARY KEY,
  seq bigserial NOT NULL,
  owner text,
  purpose text NOT NULL,
  blob_key text NOT NULL,
  expires_at bigint,
  object jsonb NOT NULL
);
CREATE INDEX files_by_owner ON files (owner, seq);
CREATE INDEX files_expiring ON files (expires_at) WHERE expires_at IS NOT NULL;

CREATE TABLE batches (
  id text PRIMARY KEY,
  seq bigserial NOT NULL,
  owner text,
  status text NOT NULL,
  -- Decided once, by a cancel or the deadline: the workers stop its shards and the batch ends so.
  stop_reason text,
  model text NOT NULL,
  submitted_at bigint NOT NULL,
  deadline_at bigint NOT NULL,
  input_key text,
  output_expires_after jsonb,
  completed bigint NOT NULL DEFAULT 0,
  failed bigint NOT NULL DEFAULT 0,
  input_tokens bigint NOT NULL DEFAULT 0,
  cached_tokens bigint NOT NULL DEFAULT 0,
  output_tokens bigint NOT NULL DEFAULT 0,
  doc jsonb NOT NULL
);
CREATE INDEX batches_by_owner ON batches (owner, seq DESC);
CREATE INDEX batches_open ON batches (deadline_at) WHERE status IN ('validating', 'in_progress', 'finalizing', 'cancelling');

CREATE TABLE shards (
  batch_id text NOT NULL REFERENCES batches (id) ON DELETE CASCADE,
  idx integer NOT NULL,
  model text NOT NULL,
  byte_start bigint NOT NULL,
  byte_end bigint NOT NULL,
  total integer NOT NULL,
  -- queued | running | done
  state text NOT NULL DEFAULT 'queued',
  -- Raised by every claim; a worker's writes count only under the epoch it claimed.
  epoch integer NOT NULL DEFAULT 0,
  -- Raised by every committed checkpoint, so a commit retried after a lost reply is not applied twice.
  checkpoints integer NOT NULL DEFAULT 0,
  worker_id text,
  lease_until timestamptz,
  -- Committed result parts in order: [{"output": key, "errors": key}], either may be absent.
  parts jsonb NOT NULL DEFAULT '[]',
  completed integer NOT NULL DEFAULT 0,
  failed integer NOT NULL DEFAULT 0,
  PRIMARY KEY (batch_id, idx)
);
CREATE INDEX shards_open ON shards (state, lease_until) WHERE state <> 'done';

CREATE TABLE workers (
  id text PRIMARY KEY,
  pool text NOT NULL,
  capacity integer NOT NULL,
  models text[] NOT NULL,
  running jsonb NOT NULL DEFAULT '[]',
  started_at timestamptz NOT NULL DEFAULT now(),
  last_seen timestamptz NOT NULL DEFAULT now(),
  preempted_until timestamptz,
  preemptions integer NOT NULL DEFAULT 0
);
