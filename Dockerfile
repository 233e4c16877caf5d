# One image for every keyslice process; docker-compose.yml picks the command
# (`keyslice coordinator`, `keyslice node`) and configures it with KEYSLICE_*
# environment variables. Two stages: the image holds the built code and the
# production dependencies only (no sources, tests, benches or compilers), and
# runs as the unprivileged user `node`.
FROM node:20-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json ./
COPY shared ./shared
COPY coordinator ./coordinator
COPY slice-worker ./slice-worker
RUN npm run build && npm prune --omit=dev

FROM node:20-bookworm-slim
WORKDIR /app
ENV NODE_ENV=production
COPY --from=build /app/package.json ./
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
# /data is where compose mounts the volumes: a new named volume takes this
# folder's owner, so the `node` user can write it.
RUN ln -s /app/dist/coordinator/cli/cli.js /usr/local/bin/keyslice \
 && mkdir /data && chown node:node /data
USER node
EXPOSE 7100 7101
CMD ["keyslice", "--help"]
