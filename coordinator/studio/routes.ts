// The studio's routes: GET / and GET /studio (the page), GET /studio/stream (its
// live feed). With a client token configured both need it; a browser cannot send
// a header with a page load or an EventSource, so `?token=` works too, as it does
// for the WebSocket API. A page load without it gets a page that says so, with a
// field to give it.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { bearerToken, secretMatches } from '../../shared/auth.js';
import { KeysliceError, toKeysliceError } from '../../shared/errors.js';
import type { Catalog } from '../metadata/catalog.js';
import type { Membership } from '../metadata/membership.js';
import { pathOf } from '../../shared/http-server.js';
import { sendError } from '../router/http-api.js';
import { studioPage, tokenPage } from './page.js';
import { StudioFeed } from './stream.js';

export const STUDIO_PATHS = ['/', '/studio'];
export const STUDIO_STREAM_PATH = '/studio/stream';

export class Studio {
  readonly feed: StudioFeed;

  /** `token`: the client token ('' requires none). */
  constructor(
    catalog: Catalog,
    cluster: Membership,
    private readonly token: string,
  ) {
    this.feed = new StudioFeed(catalog, cluster);
  }

  /** Answers the studio's GET requests (and HEAD of the page); false for any other request, which the caller handles. */
  handle(req: IncomingMessage, res: ServerResponse): boolean {
    if (req.method !== 'GET' && req.method !== 'HEAD') return false;
    const url = req.url ?? '/';
    const q = url.indexOf('?');
    const path = pathOf(url);
    const isPage = STUDIO_PATHS.includes(path);
    if (!isPage && (path !== STUDIO_STREAM_PATH || req.method !== 'GET')) return false;
    const given = bearerToken(req.headers.authorization, url);
    const allowed = secretMatches(this.token, given ?? undefined);
    if (isPage) {
      const page = allowed ? studioPage() : tokenPage(given !== null);
      res.writeHead(allowed ? 200 : 401, {
        'content-type': 'text/html; charset=utf-8',
        'content-length': Buffer.byteLength(page.html),
        'cache-control': 'no-store',
        // The page loads nothing from anywhere: the browser enforces it, and the token in the URL is not sent on as a referrer.
        'content-security-policy': page.csp,
        'referrer-policy': 'no-referrer',
        'x-content-type-options': 'nosniff',
      });
      res.end(page.html);
      return true;
    }
    if (!allowed) {
      sendError(res, new KeysliceError('Unauthorized', 'this cluster needs a client token: open the studio as /studio?token=<token> (or send "Authorization: Bearer <token>")'));
      return true;
    }
    try {
      this.feed.open(req, res, q < 0 ? null : new URLSearchParams(url.slice(q + 1)).get('table'));
    } catch (err) {
      sendError(res, toKeysliceError(err));
    }
    return true;
  }

  close(): void {
    this.feed.close();
  }
}
