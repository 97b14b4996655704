"""Log scanning: subscriptions, the fetcher and the records it returns."""
