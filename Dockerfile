FROM python:3.11-slim AS build

ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
# A C compiler for mypyc: the engine (domain/) ships compiled (deploy/compile.py).
RUN apt-get update && apt-get install -y --no-install-recommends gcc libc6-dev \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
# Only what the wheel needs, so a local .venv, caches or a host's build never enter the image.
COPY pyproject.toml README.md ./
COPY domain ./domain
COPY streams ./streams
COPY projections ./projections
COPY deploy/compile.py ./deploy/compile.py
# mypyc type-checks domain/ against its dependencies, so they are installed first.
RUN pip install . mypy setuptools \
    && python deploy/compile.py \
    && pip wheel --no-deps . -w /wheels

FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

COPY --from=build /wheels /wheels
RUN pip install /wheels/*.whl && rm -rf /wheels && useradd --system --uid 10001 quotaflow

USER quotaflow
EXPOSE 6066
CMD ["quotaflow", "agent", "--broker", "kafka://kafka:9092"]
