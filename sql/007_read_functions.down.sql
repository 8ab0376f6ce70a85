DROP FUNCTION counter_top(integer, text);
DROP INDEX counters_by_key_prefix;
DROP INDEX counters_by_total;
DROP FUNCTION counter_estimates(text[]);
DROP FUNCTION counter_totals(text[]);

COMMENT ON VIEW counter_totals IS NULL;
COMMENT ON COLUMN counter_totals.key IS NULL;
COMMENT ON COLUMN counter_totals.total IS NULL;
COMMENT ON VIEW counter_estimates IS NULL;
COMMENT ON COLUMN counter_estimates.key IS NULL;
COMMENT ON COLUMN counter_estimates.total IS NULL;
COMMENT ON COLUMN counter_estimates.exact IS NULL;
COMMENT ON COLUMN counter_estimates.variance IS NULL;
COMMENT ON COLUMN counter_estimates.error95 IS NULL;
COMMENT ON VIEW counter_overflows IS NULL;
COMMENT ON COLUMN counter_overflows.key IS NULL;
COMMENT ON COLUMN counter_overflows.total IS NULL;
