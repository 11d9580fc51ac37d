-- Reverts 003_leader_leases (a process of that release holds leadership by the advisory lock again).
DROP TABLE leader_leases;
