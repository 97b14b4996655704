"""Generated gRPC code of proto/lakelog/rpc/lakelog_api.proto (regenerate with `make proto`)."""
