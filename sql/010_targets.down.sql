DROP FUNCTION counter_unfolded(text[]);
