"""The Spark session zync runs on: its properties, jars, JVM and Spark Connect set-up, zync's SQL functions."""
