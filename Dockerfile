# syntax=docker/dockerfile:1
# The trainjob-operator image: `docker build -t trainjob-operator:0.1.0 .`
# Stage 1 builds the wheel (setuptools from requirements/build.txt) and installs it with its runtime dependencies,
# exactly the pins and hashes of requirements/runtime.txt (`make lock`), into a virtualenv, then takes out of it
# pip, setuptools and the packages the operator never imports (UNUSED); stage 2 copies only that virtualenv onto
# the same pinned base (whose own pip goes too), runs as a non-root user and has no build or install tooling.
# tests/unit/shipped/test_dockerfile.py runs the equivalent of these RUN steps (no Docker engine needed) and checks
# UNUSED against the imports of src/.
# The base by tag and by digest (the multi-architecture index of python:3.11.14-slim-bookworm, as public
# Dockerfiles pin it; not pulled here: docs/security.md, "Supply chain").
ARG PYTHON_IMAGE=python:3.11.14-slim-bookworm@sha256:65a93d69fa75478d554f4ad27c85c1e69fa184956261b4301ebaf6dbb0a3543d

FROM ${PYTHON_IMAGE} AS build
# In the lock as dependencies of dependencies, never imported by the operator: click (kopf's command line),
# pycparser (cffi's C parser, for building bindings), tzdata (dateutil's zone data; no named zone is used).
ARG UNUSED="click pycparser tzdata"
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1
WORKDIR /src
COPY pyproject.toml README.md ./
COPY requirements/runtime.txt requirements/build.txt ./requirements/
# crds/ is package data: src/trainjob_operator/crds is a symlink to it.
COPY crds ./crds
COPY src ./src
# The build backend goes into a venv of its own: a Debian-built base (PYTHON_IMAGE, the real-node images) marks
# its system Python externally managed (PEP 668), and nothing of the build reaches the final stage anyway.
RUN python -m venv /opt/build \
 && /opt/build/bin/pip install --require-hashes -r requirements/build.txt \
 && /opt/build/bin/pip wheel --no-deps --no-build-isolation --wheel-dir /wheels . \
 && python -m venv /opt/trainjob-operator \
 && /opt/trainjob-operator/bin/pip install --require-hashes -r requirements/runtime.txt \
 && /opt/trainjob-operator/bin/pip install --no-deps /wheels/*.whl \
 && /opt/trainjob-operator/bin/pip check \
 && /opt/trainjob-operator/bin/pip uninstall --yes ${UNUSED} \
 && /opt/trainjob-operator/bin/python -m pip uninstall --yes pip setuptools \
 && /opt/trainjob-operator/bin/trainjob-operator --help > /dev/null \
 && /opt/trainjob-operator/bin/python -c "import kubernetes.config.kube_config, kubernetes.client"

FROM ${PYTHON_IMAGE}
LABEL org.opencontainers.image.title="trainjob-operator" \
      org.opencontainers.image.description="Kubeflow Trainer v2 API (TrainJob, TrainingRuntime, ClusterTrainingRuntime) on kopf" \
      org.opencontainers.image.licenses="Apache-2.0"
RUN groupadd --system --gid 65532 nonroot \
 && useradd --system --uid 65532 --gid 65532 --no-create-home --home-dir /nonexistent \
    --shell /usr/sbin/nologin nonroot
COPY --from=build /opt/trainjob-operator /opt/trainjob-operator
# The base's own installer goes too (a shell in the container cannot pip install; a Debian base has none here).
RUN rm -rf /usr/local/bin/pip* /usr/local/lib/python3*/site-packages/pip* \
    /usr/local/lib/python3*/site-packages/setuptools* /usr/local/lib/python3*/site-packages/wheel* \
    /usr/local/lib/python3*/site-packages/_distutils_hack /usr/local/lib/python3*/site-packages/distutils-precedence.pth
ENV PATH=/opt/trainjob-operator/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1
# Numeric, so Kubernetes' runAsNonRoot can verify it; the chart's podSecurityContext uses the same ids.
USER 65532:65532
# 9443: admission webhooks (TLS); 10443: the status server (TLS); 8081: /healthz, /readyz and, without
# metrics.auth.enabled, /metrics; 8443: /metrics over TLS with metrics.auth.enabled.
EXPOSE 9443 10443 8081 8443
ENTRYPOINT ["trainjob-operator"]
CMD ["run"]
