FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /app
# Only what the wheel needs, so a local .venv or caches never enter the image.
COPY pyproject.toml README.md ./
COPY domain ./domain
COPY streams ./streams
COPY projections ./projections
RUN pip install . && useradd --system --uid 10001 quotaflow

USER quotaflow
EXPOSE 6066
CMD ["quotaflow", "agent", "--broker", "kafka://kafka:9092"]
