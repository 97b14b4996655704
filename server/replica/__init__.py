"""The buckets a tablet server leads: produce, fetch, offsets."""
