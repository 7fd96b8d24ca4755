# Quartermaster: multi-stage build. The runtime image has Node.js, the compiled package and its production
# dependencies only; it runs as a non-root user and needs no shell.

FROM node:20-bookworm-slim AS build
WORKDIR /src
COPY package.json package-lock.json ./
RUN npm ci --ignore-scripts --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
COPY webhooks ./webhooks
RUN npm run build

FROM node:20-bookworm-slim AS deps
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --ignore-scripts --no-audit --no-fund

FROM gcr.io/distroless/nodejs20-debian12:nonroot
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
