DROP FUNCTION counterd_owner_beat(text, text);
DROP FUNCTION counterd_fence(text[]);
DROP TABLE counterd_owners;
DROP TABLE counterd_installation;
