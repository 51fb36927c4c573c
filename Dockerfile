# syntax=docker/dockerfile:1
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/hub ./cmd/hub

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/hub /hub
USER nonroot
EXPOSE 8080
ENV RUNHUB_ADDR=0.0.0.0:8080 RUNHUB_DATA=/data
VOLUME /data
ENTRYPOINT ["/hub"]
CMD ["serve"]
