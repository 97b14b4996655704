"""Prometheus metrics of a server process: the counters and histograms its RPC handlers move, the
gauges a tablet server computes at scrape time, and the HTTP endpoint that serves them."""
