"""The gRPC edge of the servers: thin handlers that translate protobuf to the classes inside."""
