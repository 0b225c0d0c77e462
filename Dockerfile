# The service runtime docker-compose.yml runs (API, workers, Redis), for machines that reach a registry. Offline,
# scripts/service_image.sh builds the same content from Debian packages and PyPI wheels. The rewardbox code is not
# copied in: compose mounts the checkout at its host path (see docker-compose.yml).
FROM debian:bookworm-slim
RUN apt-get update && apt-get install -y --no-install-recommends python3 python3-pip redis-server ca-certificates \
    && rm -rf /var/lib/apt/lists/* \
    && echo 'rewardbox:x:900:900:rewardbox API:/nonexistent:/usr/sbin/nologin' >>/etc/passwd \
    && echo 'rewardbox:x:900:' >>/etc/group && mkdir -p /data && chown redis:redis /data
COPY pyproject.toml /tmp/pyproject.toml
RUN python3 -c "import tomllib; p = tomllib.load(open('/tmp/pyproject.toml', 'rb'))['project']; \
print('\n'.join(d for d in p['dependencies'] if not d.startswith('rewardbox')))" \
        >/tmp/requirements.txt \
    && python3 -m pip install --no-cache-dir --break-system-packages -r /tmp/requirements.txt
ENV PYTHONDONTWRITEBYTECODE=1 LANG=C.UTF-8
CMD ["/usr/bin/python3"]
