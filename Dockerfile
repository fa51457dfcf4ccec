# One static binary, one image, every role; the command picks the role:
#   docker run --rm intake:local ingress --config /etc/intake/intake.yaml
#
# Build it with `make image` (IMAGE=REGISTRY/intake:TAG IMAGE_ARCH=amd64|arm64),
# not a bare `docker build .`: the two files copied below exist only after
# `make image-bin`, and without them the build stops at the COPY with
# "bin/intake-linux-…: not found" (a scratch image has no shell to say more).
#
# Built by `make image`, which first builds bin/intake-linux-$(IMAGE_ARCH)
# on the host (CGO_ENABLED=0, -trimpath) and copies the host's CA bundle to
# bin/image/: the image is FROM scratch and the build pulls nothing, so it
# works where no registry is reachable (CI here) and the binary is the one
# `make build` and the tests use. .dockerignore sends only those two files.
#
# Numeric user 65532:65532 (not a name): Kubernetes' runAsNonRoot can only
# verify a numeric USER. No shell, so no HEALTHCHECK here: orchestrators probe
# /readyz on http.internal_addr (an httpGet probe), or exec
# `intake healthcheck` (docker-compose.yml does).
FROM scratch
ARG TARGETARCH=amd64
ARG VERSION=dev
ARG REVISION=unknown
ARG CREATED=unknown
LABEL org.opencontainers.image.title="intake" \
      org.opencontainers.image.description="Webhook receiver: at-least-once delivery to exactly-once business effect (ingress, processor, replayer, migrate)" \
      org.opencontainers.image.source="https://github.com/intakehq/intake" \
      org.opencontainers.image.url="https://github.com/intakehq/intake" \
      org.opencontainers.image.documentation="https://github.com/intakehq/intake/blob/main/deploy/compose/README.md" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.created="${CREATED}"
COPY bin/image/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY bin/intake-linux-${TARGETARCH} /usr/local/bin/intake
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/intake"]
CMD ["--help"]
