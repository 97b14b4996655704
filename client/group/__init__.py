"""Consumer groups on the client: the member that heartbeats for a scanner, and the admin calls."""
