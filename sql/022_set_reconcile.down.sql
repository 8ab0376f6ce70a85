DROP FUNCTION counter_set_reconcile(text, bytea[], timestamptz);
