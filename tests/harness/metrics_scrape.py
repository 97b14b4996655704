"""Reading a real Prometheus endpoint (a server's or the tiering job's) the way Prometheus does."""

from __future__ import annotations

import urllib.request

from prometheus_client.parser import text_string_to_metric_families

from lakelog.server.server_process import ServerProcess

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def scrape(url: str) -> Samples:
    """Every sample of the endpoint at ``url``: (name, sorted labels) -> value."""
    with urllib.request.urlopen(url, timeout=10) as answer:
        text = answer.read().decode()
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def metric_sum(port: int, name: str) -> float:
    """The sum of the samples named ``name`` on the endpoint of ``port`` on loopback."""
    return sum(value for (sample, _), value in scrape(f"http://127.0.0.1:{port}/metrics").items() if sample == name)


class Scrape:
    """One scrape of a server's endpoint, read by name and labels; a sample it does not hold reads 0."""

    def __init__(self, server: ServerProcess) -> None:
        assert server.metrics_port > 0
        self._samples = scrape(f"http://127.0.0.1:{server.metrics_port}/metrics")

    def __call__(self, name: str, **labels: str) -> float:
        return self._samples.get((name, tuple(sorted(labels.items()))), 0.0)
