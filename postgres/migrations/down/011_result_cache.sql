-- Reverts 011_result_cache: the remembered answers are dropped; workers then compute every request.
DROP TABLE result_cache_totals;
DROP SEQUENCE result_cache_seq;
DROP TABLE result_cache;
