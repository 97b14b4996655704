"""The client's side of lake reads: the LogSource plugin interface and how a plugin is found."""
