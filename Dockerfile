# One static binary, one image; the command picks the role:
#   docker run intake ingress --config /etc/intake/intake.yaml
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/intake ./cmd/intake

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/intake /usr/local/bin/intake
USER nonroot:nonroot
ENTRYPOINT ["/usr/local/bin/intake"]
CMD ["--help"]
