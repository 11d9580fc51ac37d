-- Leadership as a lease on the database's clock, in place of an advisory lock held by a connection: a frozen or
-- partitioned holder loses it when its lease lapses (the connection may stay open for hours), and every lease
-- taken over raises the term, which the holder's writes are checked against.
CREATE TABLE leader_leases (
  name text PRIMARY KEY,
  holder text NOT NULL,
  term bigint NOT NULL,
  until timestamptz NOT NULL
);
