-- The cluster's running totals (batches:<status>, requests:completed|failed, deadlines:met|missed), added to in
-- the transaction that ends a batch, so /metrics can read them from the state whatever process ended it.
CREATE TABLE totals (
  name text PRIMARY KEY,
  value bigint NOT NULL DEFAULT 0
);
-- Batches already ended count from the start.
INSERT INTO totals (name, value)
  SELECT 'batches:' || status, count(*) FROM batches WHERE status IN ('completed', 'failed', 'expired', 'cancelled') GROUP BY status;
INSERT INTO totals (name, value)
  SELECT 'requests:completed', coalesce(sum(completed), 0) FROM batches WHERE status IN ('completed', 'failed', 'expired', 'cancelled')
  UNION ALL
  SELECT 'requests:failed', coalesce(sum(failed), 0) FROM batches WHERE status IN ('completed', 'failed', 'expired', 'cancelled');
