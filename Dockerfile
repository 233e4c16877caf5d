# One image for every keyslice process; docker-compose.yml picks the command and
# configures it with KEYSLICE_* environment variables.
FROM node:20-bookworm-slim
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json ./
COPY shared ./shared
COPY coordinator ./coordinator
COPY slice-worker ./slice-worker
COPY bench ./bench
RUN npm run build && npm prune --omit=dev \
 && chmod +x dist/coordinator/cli.js && ln -s /app/dist/coordinator/cli.js /usr/local/bin/keyslice
ENV NODE_ENV=production
EXPOSE 7100 7101
