"""The lakelog servers: the coordinator and the tablet server."""
