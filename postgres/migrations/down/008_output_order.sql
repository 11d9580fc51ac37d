-- Reverts 008_output_order: a running batch's output read so far may then come in another order.
ALTER TABLE batches DROP COLUMN output_order;
