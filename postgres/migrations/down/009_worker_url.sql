-- Reverts 009_worker_url: API servers then find no worker to send synchronous requests to.
ALTER TABLE workers DROP COLUMN url;
