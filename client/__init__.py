"""The lakelog client."""
