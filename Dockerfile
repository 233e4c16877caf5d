# One image for every keyslice process; docker-compose.yml picks the command.
FROM node:20-bookworm-slim
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json ./
COPY shared ./shared
COPY coordinator ./coordinator
COPY slice-worker ./slice-worker
COPY bench ./bench
RUN npm run build && npm prune --omit=dev
ENV NODE_ENV=production
