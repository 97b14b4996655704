# The lakelog image of docker-compose.yml: the servers, the CLI and the PySpark tiering job.
# Debian bookworm's default JRE is Java 17, which PySpark 4 runs on.
FROM python:3.11-slim-bookworm

RUN apt-get update \
    && apt-get install -y --no-install-recommends default-jre-headless \
    && rm -rf /var/lib/apt/lists/*

WORKDIR /opt/lakelog
COPY pyproject.toml README.md ./
COPY proto proto
COPY lakelog lakelog
COPY server server
COPY client client
COPY lake lake
COPY tiering tiering
COPY spark spark
COPY pyspark_lakelog.py ./
RUN pip install --no-cache-dir ".[all]"

# Not root: a user of its own, owning the data directory (a named volume mounted there starts with
# this owner) and its home, where Spark keeps its caches.
RUN useradd --system --uid 10001 --user-group --home-dir /var/lib/lakelog --create-home lakelog
USER lakelog
WORKDIR /var/lib/lakelog

# Spark's driver and its local workers talk over loopback inside the container.
ENV SPARK_LOCAL_IP=127.0.0.1
# A server on the default port answers grpc.health.v1.Health; compose sets its own per service.
HEALTHCHECK --interval=5s --timeout=5s --start-period=10s --retries=5 \
    CMD ["lakelog", "health", "--bootstrap", "127.0.0.1:9123"]
CMD ["lakelog", "--help"]
