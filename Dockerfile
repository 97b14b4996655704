# lakelog's images, one target per role, each as slim as its role allows, none running as root:
#
#   docker build --target coordinator   -t lakelog-coordinator .     # servers: no JVM, no PySpark
#   docker build --target tablet-server -t lakelog-tablet-server .
#   docker build --target tiering       -t lakelog-tiering .         # PySpark + Java 17 (also Spark Connect)
#   docker build --target client        -t lakelog-client .          # the CLI and the Python client
#
# docker-compose.yml builds them all. Each has a HEALTHCHECK: the servers' grpc.health.v1.Health
# (`lakelog health`), the tiering job's metrics endpoint, the client's reach to its cluster.

FROM python:3.11-slim-bookworm AS source
ENV PYTHONDONTWRITEBYTECODE=1 PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
# Not root: a user of its own, owning the data directory (a named volume mounted there starts with
# this owner) and its home, where Spark keeps its caches.
RUN useradd --system --uid 10001 --user-group --home-dir /var/lib/lakelog --create-home lakelog
WORKDIR /opt/lakelog
COPY pyproject.toml README.md ./
COPY proto proto
COPY lakelog lakelog
COPY server server
COPY client client
COPY lake lake
COPY tiering tiering
COPY spark spark
COPY spark_runtime spark_runtime
COPY pyspark_lakelog.py ./

# The CLI and the client; the health checker is its only server-side package (for `lakelog health`).
FROM source AS client
RUN pip install ".[lake]" "grpcio-health-checking>=1.85.1" && rm -rf /opt/lakelog
USER lakelog
WORKDIR /var/lib/lakelog
# Healthy while the cluster of $LAKELOG_BOOTSTRAP answers.
HEALTHCHECK --interval=30s --timeout=5s --start-period=5s --retries=3 CMD ["lakelog", "health"]
CMD ["lakelog", "--help"]

# What both servers need: gRPC extras, metrics, PyIceberg (the coordinator's lake bookkeeping).
FROM source AS server
RUN pip install ".[server,lake]" && rm -rf /opt/lakelog
USER lakelog
WORKDIR /var/lib/lakelog
EXPOSE 9123 9249
HEALTHCHECK --interval=5s --timeout=5s --start-period=10s --retries=5 \
    CMD ["lakelog", "health", "--bootstrap", "127.0.0.1:9123"]

FROM server AS coordinator
CMD ["lakelog", "coordinator", "--data-dir", "/var/lib/lakelog", "--set", "server.host=0.0.0.0"]

FROM server AS tablet-server
CMD ["lakelog", "tablet-server", "--data-dir", "/var/lib/lakelog", "--set", "server.host=0.0.0.0"]

# The PySpark tiering job; also `lakelog spark-connect`. Debian bookworm's default JRE is Java 17,
# which PySpark 4 runs on.
FROM source AS tiering
RUN apt-get update \
    && apt-get install -y --no-install-recommends default-jre-headless \
    && rm -rf /var/lib/apt/lists/*
RUN pip install ".[lake,spark]" && rm -rf /opt/lakelog
USER lakelog
WORKDIR /var/lib/lakelog
# Spark's driver and its local workers talk over loopback inside the container.
ENV SPARK_LOCAL_IP=127.0.0.1
EXPOSE 9249
# Healthy while the job serves its metrics (`lakelog tier --metrics-port 9249`).
HEALTHCHECK --interval=10s --timeout=5s --start-period=60s --retries=5 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:9249/metrics', timeout=4)"]
CMD ["lakelog", "tier", "--metrics-port", "9249", "--set", "metrics.host=0.0.0.0"]
