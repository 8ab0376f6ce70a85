DROP FUNCTION budget_add(text, bigint);
DROP VIEW budget_totals;
DROP TABLE budget_sequences;
DROP TABLE budget_leases;
DROP TABLE budgets;
