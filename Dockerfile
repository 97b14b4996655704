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

# Spark's driver and its local workers talk over loopback inside the container.
ENV SPARK_LOCAL_IP=127.0.0.1
CMD ["lakelog", "--help"]
