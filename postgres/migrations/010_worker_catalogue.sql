-- What each worker serves as API servers name batches by it: its models' names, aliases, prices and defaults, and
-- the one that answers other names. An API server with no models of its own routes by the live workers' catalogues.
ALTER TABLE workers ADD COLUMN catalogue jsonb;
