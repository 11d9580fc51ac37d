-- Reverts 006_totals: /metrics' batch, request and SLA totals start again from zero on the way back up.
DROP TABLE totals;
