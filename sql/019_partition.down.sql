DROP TABLE counterd_partition;
