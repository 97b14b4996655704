"""Consumer groups on the coordinator: membership, the bucket assignor and committed offsets."""
