# Quartermaster: multi-stage build. The runtime image has Node.js, the compiled package and its production
# dependencies only; it runs as a non-root user and needs no shell.
#
# Node.js 24 in every stage: an LTS line, supported until 2028-04-30 (Node.js 20 reached end of life on
# 2026-04-30 and 22 ends on 2027-04-30; schedule: github.com/nodejs/Release, schedule.json). The package still
# runs on Node.js >= 20.6 (package.json engines) for those who run it outside this image. All three stages are
# Debian 12 (bookworm), so what the build stages install matches the runtime's libc.
# Build: docker build -t REGISTRY/quartermaster:0.1.0 .   (README.md, "Install", says how to use it)

FROM node:24-bookworm-slim AS build
WORKDIR /src
COPY package.json package-lock.json ./
RUN npm ci --ignore-scripts --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
COPY webhooks ./webhooks
# The `serve` bundle `npm run build` writes (release/bundle.ts: the cold start), with the stand-ins it puts in place
# of modules serve never runs (test/unit/project/bundle.test.ts checks this list against what the bundle reads).
COPY release/bundle.ts release/no-otel.ts release/no-pushgateway.ts release/node-http.ts ./release/
RUN npm run build

FROM node:24-bookworm-slim AS deps
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --ignore-scripts --no-audit --no-fund

FROM gcr.io/distroless/nodejs24-debian12:nonroot
WORKDIR /app
COPY --from=deps /app/node_modules ./node_modules
COPY --from=build /src/dist ./dist
COPY package.json ./
COPY bin ./bin
USER 65532:65532
EXPOSE 8443
# distroless/nodejs runs `node` with these arguments: no shell at run time.
ENTRYPOINT ["/nodejs/bin/node", "/app/bin/quartermaster.js"]
CMD ["serve", "--port=8443", "--tls-cert=/etc/quartermaster/tls/tls.crt", "--tls-key=/etc/quartermaster/tls/tls.key"]
