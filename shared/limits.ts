// Every limit and default of keyslice, defined once. Units are in the names.
// Reference points: DynamoDB (keys 2048/1024 bytes, items 400 KB, 25 writes or
// 100 reads per batch, 1 MB query pages) and v3io (1024 slices).

/** Slices per cluster, fixed when the cluster is created. 1024 as in v3io: fine
 * enough to move load in small steps when nodes join (about 0.1% of the keyspace
 * per slice), while per-slice state is created lazily, so empty slices cost
 * nothing but an entry in the cluster map. */
export const SLICE_COUNT_DEFAULT = 1024;
export const SLICE_COUNT_MAX = 65536;

/** Key sizes count every column of the key together (UTF-8 for strings, 8 bytes a number). */
export const SHARDING_KEY_BYTES_MAX = 2048;
export const SORTING_KEY_BYTES_MAX = 1024;
/** Columns of a sharding key and of a sorting key (Tablestore allows 4 primary-key columns in all). */
export const SHARDING_KEY_COLUMNS_MAX = 4;
export const SORTING_KEY_COLUMNS_MAX = 4;
export const ITEM_BYTES_MAX = 400 * 1024;
export const ATTRIBUTE_NAME_BYTES_MAX = 255;
/** Lists and maps nested deeper than this are refused. */
export const VALUE_DEPTH_MAX = 32;

export const TABLE_NAME_CHARS_MIN = 3;
export const TABLE_NAME_CHARS_MAX = 255;
export const TABLES_MAX = 256;
/** A DynamoDB tag's key and value (TagResource, CreateTable's Tags), as DynamoDB bounds them. */
export const TAG_KEY_CHARS_MAX = 128;
export const TAG_VALUE_CHARS_MAX = 256;

/** Even distribution: buckets per sharding key (v3io's default is 64). */
export const EVEN_DISTRIBUTION_BUCKETS_DEFAULT = 64;
export const EVEN_DISTRIBUTION_BUCKETS_MAX = 1024;

export const BATCH_WRITE_ITEMS_MAX = 25;
export const BATCH_GET_ITEMS_MAX = 100;

/** GetItems: default and largest page in items, and the page byte budget. */
export const PAGE_ITEMS_DEFAULT = 1000;
export const PAGE_ITEMS_MAX = 10_000;
export const PAGE_BYTES_MAX = 1024 * 1024;
/** The TypeScript client's getAllItems and forEachItemPage: pages of one GetItems that a call follows by default, at
 * most (getAllItems throws past it; forEachItemPage answers the marker to go on from). */
export const CLIENT_RANGE_PAGES_MAX_DEFAULT = 100_000;
/** A worker keeps the client-form bytes (msgpack) of an item that a packed range page or a packed Get has read, so
 * that later pages and Gets copy them instead of packing the item again (packing was a third of a worker's time on range reads:
 * bench/PROFILE.md), and likewise of an item that a replica's compaction packed or that a follower applied from its
 * leader's record (the bytes the record carried), so that compactions write them as they are (log-format.ts
 * SetEffectsText); only for items of at most this many bytes (as itemBytes counts them), where packing's cost
 * per item, not per byte, dominates. The kept bytes add to a worker's memory: for items of about 200 bytes,
 * 284 bytes each beside the 497 that the stored item takes (measured with --expose-gc, 20,000 items). Nothing
 * evicts them: they go only with their item (a write, a delete, a move, a dropped slice or table), and
 * PACKED_ITEMS_KEPT_BYTES_PER_NODE_MAX bounds their sum per node; below it, a worker whose items were all read by ranges or Gets, or compacted
 * holds one copy of each of those up to this size: for items of about 1,000 and 4,000
 * bytes, +1,067 and +4,070 bytes beside 1,256 and 4,254 (+85%, +96%; measured the same way with items of a key and
 * one long string, which at 200 bytes give +280 beside 455). */
export const PACKED_ITEM_CACHE_BYTES_MAX = 4 * 1024;
/** At most this many bytes of kept packed items per slice node (their length and a string header each; items
 * replaced or deleted give theirs back), shared evenly among the node's workers (each keeps at most its share,
 * packedItemsKeptBytesPerWorker): past a worker's share, its range pages, Gets and compactions pack those items each
 * time, as before kept bytes. Since compactions and a follower's applies keep bytes too (2026-11-27), a node holding
 * replicated slices fills its share with the items written first, whether read or not: up to this much more memory
 * with about this much data, where before only reads filled it (bench/README.md, "A compaction writes the items' kept
 * bytes"). A node's items read through by ranges or Gets would otherwise grow its memory by up to 1.6-2x
 * (above). A figure per node, not per worker, so that a node's memory does not grow with --workers (at 128 MiB per
 * worker, 16 workers could keep 2 GiB beside the data). 256 MiB is what the default node (WORKERS_PER_NODE_DEFAULT
 * workers) kept before: room for the kept bytes of about 900,000 items of 200 bytes, beside the about 450 MiB
 * those items take stored; a node that holds more keeps the bytes of the items read first and packs the rest each
 * time. Nothing is evicted: past the share a page costs what it cost before kept bytes, and evicting would need a
 * recency mark per item (memory) or a walk over a worker's items (a stall on its thread). */
export const PACKED_ITEMS_KEPT_BYTES_PER_NODE_MAX = 256 * 1024 * 1024;
/** A worker's share of PACKED_ITEMS_KEPT_BYTES_PER_NODE_MAX on a node of `workerCount` workers. */
export function packedItemsKeptBytesPerWorker(workerCount: number): number {
  return Math.floor(PACKED_ITEMS_KEPT_BYTES_PER_NODE_MAX / workerCount);
}
/** Parallel scan: a full-table scan split into at most this many segments. */
export const SCAN_SEGMENTS_MAX = 1024;
/** A router keeps, per scan range (a whole table, a segment), what the map asks of each worker for it (the slices
 * it owns there, as a SliceSet) while the map's epoch and its links stay, so that a page does not walk every slice
 * of the range again (coordinator/router/router.ts, scanAsks): at most this many bytes of those plans per router,
 * counted as their SliceSets plus SCAN_ASK_OVERHEAD_BYTES per worker asked and SCAN_PLAN_OVERHEAD_BYTES per plan;
 * the oldest go first. A whole-table plan of the default 1,024 slices on 2 nodes x 2 workers counts about 2 KiB, so
 * this holds every segment of SCAN_SEGMENTS_MAX segments (about 0.7 MiB) several times over; one of 65,536 slices
 * over 64 workers counts about 540 KiB. A plan larger than the whole budget is used for its page and not kept. */
export const SCAN_PLANS_BYTES_MAX = 4 * 1024 * 1024;
/** What a kept scan plan costs beside its SliceSets (SCAN_PLANS_BYTES_MAX), per worker asked (its ask's object and
 * Uint8Array, the node's entry in the plan's links) and per plan (the plan's object, its two lists, its Map entry).
 * Measured by bench/scan-plan-bytes.ts (node 20; heap and ArrayBuffer bytes after a full GC with the real Router's
 * plans kept, less after they are dropped, over 300 to 10,000 plans of 2 to 32 asks): 263 to 264 bytes an ask and
 * 416 to 475 a plan (the Map's table, which grows by doubling, is most of the spread). So counted, each shape of 2 to
 * 1,024 slices measured is counted within 6% of what it takes. */
export const SCAN_ASK_OVERHEAD_BYTES = 264;
export const SCAN_PLAN_OVERHEAD_BYTES = 420;

/** Expressions (conditions, filters, updates, projections, key conditions), as in
 * DynamoDB: each expression string at most 4 KB of UTF-8, at most 100 operands
 * in one IN list, at most 300 operators and functions in one update expression,
 * document paths at most 32 levels deep. */
export const EXPRESSION_BYTES_MAX = 4096;
export const EXPRESSION_IN_OPERANDS_MAX = 100;
export const EXPRESSION_UPDATE_OPERATORS_MAX = 300;
export const EXPRESSION_PATH_DEPTH_MAX = 32;
/** Parentheses and NOTs nested deeper than this are refused: the parser recurses, and the 4 KB limit alone would allow ~2000 levels. */
export const EXPRESSION_NESTING_MAX = 100;
/** Entries of one request's `names` (`#n`) and `values` (`:v`) maps, each. */
export const EXPRESSION_PLACEHOLDERS_MAX = 1000;
/** How deep a compiled (bound) expression may nest when a slice node checks an op.
 * AND/OR chains nest one level per clause, and a clause with its AND takes at least
 * 5 bytes of the 4 KB text (about 820 levels), plus EXPRESSION_NESTING_MAX levels of
 * NOT and parentheses; deeper is not an op our coordinator makes. */
export const BOUND_EXPRESSION_DEPTH_MAX = 1024;
/** Compiled expressions kept by the parser's cache (least recently used goes first). */
export const EXPRESSION_CACHE_ENTRIES = 1000;

/** One client request (HTTP body or WebSocket frame). 25 items of 400 KB fit. */
export const REQUEST_BYTES_MAX = 16 * 1024 * 1024;
/** Requests in flight on one client connection before the coordinator stops reading it. */
export const CLIENT_IN_FLIGHT_MAX = 8192;
/** Bytes of responses not yet handed to the kernel on one WebSocket connection (encoded
 * and buffered, plus the expected size of those still being computed) before the
 * coordinator stops reading it; it reads again below half. A client that does not
 * read its answers then fills its own buffers, not the coordinator's memory. */
export const CLIENT_UNSENT_BYTES_MAX = 4 * 1024 * 1024;
/** Expected size of one response before a connection has seen any (then: a running mean
 * of its responses that follows a rise at once and a fall slowly). 64 of these fill
 * CLIENT_UNSENT_BYTES_MAX, which bounds the first burst of a connection; one frame of
 * small responses brings the estimate down. */
export const CLIENT_RESPONSE_BYTES_GUESS = 64 * 1024;
/** A router joins a client frame whose items pass through (a range page) in a buffer it reuses from frame to frame
 * (ws-api.ts, FrameSlab), one of at least CLIENT_FRAME_SLAB_BYTES_MIN, grown to the largest such frame up to
 * CLIENT_FRAME_SLAB_BYTES_MAX (while such frames keep coming: CLIENT_FRAME_SLAB_SHRINK_MS); a larger frame gets a buffer of
 * its own. A socket that cannot take a frame at once
 * keeps its slab whole until the frame is written, and the frames after it get buffers of their own: a client that does
 * not read costs at most one slab beyond its CLIENT_UNSENT_BYTES_MAX. */
export const CLIENT_FRAME_SLAB_BYTES_MIN = 64 * 1024;
export const CLIENT_FRAME_SLAB_BYTES_MAX = 4 * 1024 * 1024;
/** A slab grown past CLIENT_FRAME_SLAB_BYTES_MIN is looked at this long after it grew, then as long again after each
 * look while it is larger than that: it shrinks to the largest frame joined since (at least CLIENT_FRAME_SLAB_BYTES_MIN;
 * a frame packed whole or larger than CLIENT_FRAME_SLAB_BYTES_MAX is never joined in it and does not count),
 * so that one large answer does not keep up to CLIENT_FRAME_SLAB_BYTES_MAX for the life of the process, idle or
 * answering smaller frames. Growing again costs one frame a buffer of its own: a stream of large frames keeps it. */
export const CLIENT_FRAME_SLAB_SHRINK_MS = 1000;
/** HTTP: requests run at once on one keep-alive connection (pipelined); the coordinator
 * stops reading the connection while that many are waiting for their responses to leave
 * for the kernel, so a client that does not read holds about this many responses in our
 * memory (plus the requests of one read from the socket, waiting unstarted). */
export const HTTP_PIPELINED_REQUESTS_MAX = 16;
/** HTTP server timeouts. A request's headers must arrive within HTTP_HEADERS_TIMEOUT_MS
 * of its first byte and the whole request (a body of up to REQUEST_BYTES_MAX: at least
 * about 0.5 MB/s) within HTTP_REQUEST_TIMEOUT_MS, or it is answered 408 and the connection
 * closed; checked every HTTP_TIMEOUT_CHECK_INTERVAL_MS. An idle keep-alive connection
 * is closed after HTTP_KEEP_ALIVE_TIMEOUT_MS (over the 60 s idle timeout of common load
 * balancers, so that they close first), and any HTTP connection on which nothing moves
 * either way (e.g. a client that does not read its answer) after HTTP_IDLE_TIMEOUT_MS. */
export const HTTP_HEADERS_TIMEOUT_MS = 10_000;
export const HTTP_REQUEST_TIMEOUT_MS = 30_000;
export const HTTP_TIMEOUT_CHECK_INTERVAL_MS = 1_000;
export const HTTP_KEEP_ALIVE_TIMEOUT_MS = 65_000;
export const HTTP_IDLE_TIMEOUT_MS = 120_000;
/** --http-headers-timeout-ms and --http-request-timeout-ms (keyslice coordinator and keyslice router for the client
 * port, keyslice node for its --metrics-port: shared/http-timeout-args.ts): the first two
 * set otherwise, each at least this (the check runs every HTTP_TIMEOUT_CHECK_INTERVAL_MS), the headers' at most the
 * request's (node:http refuses otherwise). */
export const HTTP_TIMEOUT_MS_MIN = 1_000;
export const HTTP_TIMEOUT_MS_MAX = 600_000;
/** After a 413, the rest of the body is read and dropped (so that a client still sending
 * gets to read the answer rather than a reset connection), up to this many bytes; past
 * them the connection is cut. */
export const HTTP_DISCARD_BYTES_MAX = 64 * 1024 * 1024;
/** The Retry-After header (seconds) of every 503 (Unavailable) and 429 (ThroughputExceeded). */
export const RETRY_AFTER_SECONDS = 1;
/** Requests a client may put in one WebSocket frame. */
export const CLIENT_FRAME_REQUESTS_MAX = 4096;
/** One frame between coordinator and slice node. */
export const INTERNAL_FRAME_BYTES_MAX = 256 * 1024 * 1024;
/** Ops and (estimated) bytes a link queues for one worker of a node before it sends them at
 * once, whatever is in flight (coordinator/metadata/send-queue.ts). A frame holds at most one
 * such batch per worker, so it stays well under INTERNAL_FRAME_BYTES_MAX. */
export const NODE_BATCH_OPS_MAX = 512;
export const NODE_BATCH_BYTES_MAX = 4 * 1024 * 1024;
/** Batches a link keeps unanswered per worker of a node; more ops for that worker wait and
 * go together in the frame after the next answer. 2: one running in the worker and one
 * waiting in the node, so the worker never idles for a round trip (bench/PROFILE.md). */
export const NODE_LINK_WORKER_BATCHES_IN_FLIGHT = 2;

export const WORKERS_PER_NODE_DEFAULT = 2;
export const WORKERS_PER_NODE_MAX = 64;
export const COORDINATOR_PORT_DEFAULT = 7100;
export const SLICE_NODE_PORT_DEFAULT = 7101;
/** A slice node's own /metrics port (docs/metrics.md): 0, off, unless an operator asks for it, so that a node
 * opens no port beyond its node port by default. */
export const SLICE_NODE_METRICS_PORT_DEFAULT = 0;
/** Connections a slice node's --metrics-port holds at once; past them a new one is closed at once. A scraper needs
 * one or two; the bound keeps clients that connect and wait (each cut after HTTP_HEADERS_TIMEOUT_MS) from taking
 * the file descriptors and memory the node port and the slices' files need. */
export const SLICE_NODE_METRICS_CONNECTIONS_MAX = 16;

/** Coordinator to node: how long to wait for a batch reply, and reconnect backoff (also a router's
 * and a node's links to its peers). The back-off stops growing at 250 ms: a restarted node is dialed
 * again within that, so its replicas are counted in elections and caught up by their leaders soon
 * after it is back (at 2 s, failover waited up to 2 s longer when the node that had been killed before
 * was needed for a majority: bench/FAILOVER.md); a failed dial to a port that refuses costs little. */
export const NODE_REQUEST_TIMEOUT_MS = 30_000;
export const NODE_CONNECT_TIMEOUT_MS = 5_000;
export const NODE_RECONNECT_DELAY_MS_MIN = 100;
export const NODE_RECONNECT_DELAY_MS_MAX = 250;
/** Membership: a slice node started with --coordinator registers and then repeats
 * it as a heartbeat; the coordinator counts a node gone after this long without one. Placement, status, a drain step's
 * wait and the undo of a move (membership.ts countsUp) count a node as down after as long with nothing from it at all
 * (NodeLink.heardAt: a frame, a pong to the ping every link gets each turn, a heartbeat), so that a node known by address
 * (no heartbeats), frozen with its link open, is given up after the time a node with heartbeats would be. */
export const NODE_HEARTBEAT_INTERVAL_MS = 1_000;
export const NODE_HEARTBEAT_TIMEOUT_MS = 5_000;
/** The coordinator's membership tick: it notes nodes down, refills short replica sets, removes nodes down too long
 * (--remove-down-after-ms), undoes stalled moves and rebalances this often (coordinator/metadata/membership.ts). */
export const REBALANCE_INTERVAL_MS = 500;
/** The coordinator's log line for a node that stops or starts counting up (coordinator/metadata/node-count-log.ts): at
 * most one a node this often. The first change after a quiet spell is said at once; a node whose link flaps would
 * change at every membership turn (REBALANCE_INTERVAL_MS), two lines a second for as long as it flaps. */
export const NODE_COUNT_LOG_INTERVAL_MS = 5_000;
/** Replication (docs/replication.md): with --replication-factor auto (the default) a slice has
 * this many replicas when at least this many nodes are active, else one per active node. */
export const REPLICATION_FACTOR_AUTO_MAX = 3;
export const REPLICATION_FACTOR_MAX = 7;
/** The most replicas one slice's set may list in an Assign (coordinator/metadata/replica-leaders.ts assignReplication,
 * which asserts it; the node refuses more): until a replica-set change settles, every replica of every set of the
 * change answers for the slice (docs/replication.md, "Replica-set changes"), so the list is the union of the sets, not
 * one set of R. Two more than R: a drain's or a move's step adds a replica before one leaves (R + 1), and a drain
 * step undone puts its new replica on another node while the one it replaces is still listed ({R, j} -> {R, j'}), as
 * does a drain started while a move of the slice is under way (its leaving replica, the draining one, and one new
 * replica beside each: one node drains at a time, one replica leaves a slice at a time). */
export const REPLICAS_LISTED_MAX = REPLICATION_FACTOR_MAX + 2;
/** The coordinator counts a slice's leader gone after this long without an answer, and elects another.
 * A frozen (or cut off) leader's slices are served again about this long plus an election after it
 * stopped answering; 1.5 s (3 pings) keeps that under the 3 s failover target (bench/FAILOVER.md). */
export const LEADER_HEARTBEAT_TIMEOUT_MS = 1_500;
/** How often a leader's liveness is asked; how long an election waits for a majority before it
 * starts again at a newer term; records a leader sends a follower in one append. */
export const LEADER_HEARTBEAT_INTERVAL_MS = 500;
/** A replica-set change's settle probes (failover.ts: Pings asking each replica whether it holds the elected leader's
 * barrier) go a tick after its leader was elected, this share of LEADER_HEARTBEAT_INTERVAL_MS later, then twice as long
 * each time up to the interval (so at one half: 0, 250, 750, 1250 ms... on 100 ms ticks 0, 300, 800, 1300), against 0,
 * 500, 1000 ms before: at most one Ping more per replica per change, and a change that settles in tens of ms (a replica
 * move on a quiet slice) is seen settled about 300 ms after its election rather than 500. */
export const SETTLE_PROBE_FIRST_GAP_SHARE = 0.5;
/** Questions (a Ping or a Prepare) the coordinator keeps per worker of a node that has not answered them
 * (OpenQuestions in coordinator/metadata/replica-leaders.ts), so that a worker stuck with its node's link open, still
 * asked a Ping per led slice each ping interval and a Prepare per election, costs bounded memory (at most
 * WORKERS_PER_NODE_MAX times this a node, about 48 bytes each). Past it the oldest is kept (its time decides the
 * node's silence) and the newer half folded into the question after them, which keeps their time. Four times the
 * default slice count: a healthy worker owes at most its slices' questions of about two ping intervals (it answers
 * within 1.5), so it is not reached at the defaults. */
export const OPEN_QUESTIONS_PER_WORKER_MAX = 4 * SLICE_COUNT_DEFAULT;
/** A leader that misses the heartbeat timeout, or an election that misses its timeout, while its node (or the
 * nodes it waits on) still answer other slices' messages is slow, not gone: it gets this many times the timeout
 * before another election (coordinator/metadata/failover.ts). Under repeated SIGKILLs on a loaded machine, new
 * leaders busy catching up a restarted follower were deposed 1.5 s after their election, and elections waiting on
 * a restarting node's promises started again at a newer term, each round more work for the same busy nodes
 * (bench/FAILOVER.md). A frozen or dead node answers nothing and is replaced after the plain timeout. */
export const LEADER_SLOW_TIMEOUT_FACTOR = 3;
/** A replica counts as silent (coordinator/metadata/failover.ts heardLately), and loses the allowances above for its
 * slice and every other slice its worker runs, once a question the coordinator asked that worker (a Ping or a
 * Prepare) has gone this many ping intervals unanswered (per worker, not per node: another worker of its node that is
 * stuck answers none of its slices' questions): 750 ms at the defaults, within the heartbeat timeout (a frozen leader
 * is then silent 2.5 ping intervals and a tick after its last answer at the latest: docs/replication.md, "A node that
 * answers"). Named NODE_SILENT_AFTER_PING_INTERVALS until it counted per worker. */
export const WORKER_SILENT_AFTER_PING_INTERVALS = 1.5;
/** A worker of a node that has answered the coordinator no question of a slice the node still replicates, since the
 * node's link came up (a new replica's first questions), may be dropping them because its assignment has not reached
 * it yet (it comes with a batch task, which a Replicate can overtake, later still on a node starved of CPU), and its
 * questions asked again are of those slices too: its silence counts from its first open question this many
 * ping intervals later (OpenQuestions in coordinator/metadata/replica-leaders.ts). So an assignment up to 1.5 s late at
 * the defaults costs no allowance (up to 1.95 s, less the time the worker takes to answer: asked again each 300 ms,
 * silent 750 ms after the grace); a worker that never answers counts as silent WORKER_SILENT_AFTER_PING_INTERVALS plus
 * this many ping intervals after its first question (2.25 s at the defaults), against 1.5 for a worker that answered
 * before. */
export const FIRST_ANSWER_GRACE_PING_INTERVALS = 3;
/** The share of an election's timeout that a leadership handover's own election waits for the answer of the replica
 * handed to, once a majority answered without it (coordinator/metadata/failover.ts): that replica holds the old
 * leader's last record and should win the tie, but its promise waits for a sync, so the old leader's answer and a
 * third one often come first and the tie went back to the old leader (docs/replication-notes.md, "Elections during a
 * join"). The first election of a slice never led waits as long for the map's leader, which wins the tie of empty logs
 * (failover.ts finishElection). Below 1 so that the wait never restarts the election. */
export const HANDOVER_TARGET_ANSWER_WAIT_SHARE = 0.5;
/** The share of an election's timeout that an election waits, once a majority of every set answered, for the answers
 * that may still let a replica of the newest set lead rather than one that left it (coordinator/metadata/failover.ts
 * finishElection): such a carrier leads the joint sets only until its barrier commits, takes no routed write (routers
 * keep the set's owner), and costs a second election, up to a ping interval after its barrier committed (and a lease
 * more where its Pong saying it stopped is lost), all without a serving leader (docs/replication.md, "A leader outside
 * the newest set"). Only for replicas whose nodes answer (heardLately), so a node that is down costs no wait. Below 1
 * so that the wait never restarts the election. */
export const CARRIER_AVOIDED_ANSWER_WAIT_SHARE = 0.5;
export const LEADER_ELECTION_TIMEOUT_MS = 2_000;
/** A replica outside the newest set elected to carry an unsettled change (coordinator/metadata/failover.ts
 * finishElection) that has not settled it this many heartbeat timeouts after its election is replaced by an election
 * (`carrier_unsettled`), even while it answers the coordinator: until it settles, the slice has no serving leader
 * (routers keep the set's owner, which does not serve), and a carrier that cannot get its barrier onto a majority of
 * the newest set (a link to those replicas cut, their nodes refusing its records) would lead without end. Its barrier
 * needs one replication round, and the coordinator hears of it within a ping interval; a newest-set replica that
 * catches up first makes it slow, not stuck. So the same allowance as a leader that answers late
 * (LEADER_SLOW_TIMEOUT_FACTOR, 4.5 s at the defaults): the most the coordinator waits for a leader that answers but
 * does not do its work, and with an election after it (up to LEADER_ELECTION_TIMEOUT_MS) still within the router's
 * FAILOVER_RETRY_MS_MAX for most of the carrier's window (docs/replication.md, "A leader outside the newest set"). */
export const CARRIER_SETTLE_TIMEOUT_FACTOR = LEADER_SLOW_TIMEOUT_FACTOR;
export const REPLICATION_APPEND_RECORDS_MAX = 256;
/** A leader gathers a task's record payloads in a scratch buffer before copying them into one buffer of their own
 * (slice-worker/log-format.ts encodeReplicatedEach). It starts at this size: room for a task of a few dozen small
 * writes (32 one-put records of about 260 bytes are about 8 KiB) without growing, beside the 32 KiB or more that
 * msgpackr's own reused buffer takes. It doubles as a larger task needs. */
export const REPLICATED_SCRATCH_BYTES_INITIAL = 64 * 1024;
/** The scratch buffer grown for a task is kept for the next one while at most this large; a larger one (a task of
 * large items: an item may be ITEM_BYTES_MAX) is dropped after its task, so that one such task does not hold that
 * memory for the worker's life. */
export const REPLICATED_SCRATCH_KEPT_BYTES_MAX = 1024 * 1024;
/** The coordinator's failover runner looks at its slices this often (pings and timeouts); a tick later than
 * COORDINATOR_STALL_MS beyond its interval means the coordinator was stalled, and that tick looks at no timeout
 * (the answers of the stall are read first: coordinator/metadata/replica-leaders.ts). */
export const FAILOVER_TICK_MS = 100;
export const COORDINATOR_STALL_MS = 300;
/** While the coordinator's cluster-map saves keep failing (a full or broken disk), the failovers whose turns they lost
 * redo them (and the save) after a wait that doubles per failed save in a row, from one FAILOVER_TICK_MS to this
 * (coordinator/metadata/save-backoff.ts). Nothing but a save tells the coordinator that the disk is back, so a disk
 * that recovers is noticed at most this long after (plus a tick): 1 s keeps that under LEADER_HEARTBEAT_TIMEOUT_MS, a
 * wait the slices can take anyway, while it cuts a failing disk's save attempts, and each such slice's terms and
 * `unrecorded` elections, from 10 a second to 1. */
export const MAP_SAVE_RETRY_MS_MAX = 1_000;
/** The smallest --leader-timeout-ms: below it, a busy leader would be deposed for a slow answer. */
export const LEADER_HEARTBEAT_TIMEOUT_MS_MIN = 300;
/** A router retries an op on a replicated slice that has no serving leader (a failover) for at most
 * this long and this many times, waiting FAILOVER_RETRY_DELAY_MS_STEP more after each try, up to
 * FAILOVER_RETRY_DELAY_MS_MAX (failoverDelayMs in shared/timeout.ts); then it answers
 * Unavailable with routerRetried, which no caller above it asks again (errors.ts callerMayRetry), so this is
 * how long a request waits for a failover at most, however many callers stand above the router. */
export const FAILOVER_RETRY_MS_MAX = 10_000;
/** --failover-retry-ms (keyslice coordinator and keyslice router): FAILOVER_RETRY_MS_MAX set shorter, at least this
 * (a failover takes the leader timeout, 1.5 s by default, and an election). Shorter, a request on a slice with no
 * leader fails sooner, but a failover that takes longer is not ridden out. Not longer: the windows that keep a write
 * sent again from being applied twice (APPLIED_REQUESTS_KEPT_MS, IDEMPOTENCY_WINDOW_MS) are sized to it. */
export const FAILOVER_RETRY_MS_MIN = 1_000;
export const FAILOVER_RETRIES_MAX = 200;
export const FAILOVER_RETRY_DELAY_MS_STEP = 10;
export const FAILOVER_RETRY_DELAY_MS_MAX = 100;
/** Request ids (docs/replication.md, "A write sent twice is applied once"): an id's router instance, drawn at random
 * by each router at its start, is at most this (52 bits: a safe integer, so exact as a number). */
export const REQUEST_ID_INSTANCE_MAX = 2 ** 52 - 1;
/** Each replica of a slice remembers the ids of the writes it applied, and their answers, for at least this long
 * after the write (by the leader's clock, as the log records it), so that a write that a router sends again after
 * an unknown outcome is answered, not applied twice. A router sends again for at most FAILOVER_RETRY_MS_MAX after
 * its first try; an answer it waited for may take up to NODE_REQUEST_TIMEOUT_MS to turn out unknown, and the
 * resend may wait for its node's link meanwhile: six times the first bound covers both with room. */
export const APPLIED_REQUESTS_KEPT_MS = 60_000;
/** ...and at most this many ids and this many bytes of them (ids and answers) per slice, the oldest forgotten
 * first (the newest is always kept). The count matters for the writes a slice takes between a write and its resend:
 * during a failover none (there is no serving leader), but a leader without a majority answers a write it could not
 * commit after REPLICA_COMMIT_WAIT_MS and goes on taking others (each held, none committed): at more than about
 * 400 writes a second on one slice through the router's 10 s of resends, an id may be forgotten before its resend
 * comes, and the resend applied again. */
export const APPLIED_REQUESTS_PER_SLICE_MAX = 4096;
/** A client's idempotency id (docs/replication.md, "A client's write sent twice"): at most this many printable
 * ASCII characters (DynamoDB's ClientRequestToken takes 36, a UUID's length). */
export const IDEMPOTENCY_ID_CHARS_MAX = 64;
/** A client's copy of a write sent within this long after its first copy is applied at most once: the first is
 * remembered for APPLIED_REQUESTS_KEPT_MS after it was applied, and a router may still send a copy on for
 * NODE_REQUEST_TIMEOUT_MS (waiting for an answer that turns out unknown) plus FAILOVER_RETRY_MS_MAX (resends)
 * after it received it. The TypeScript client sends no copy later (ClientOptions.writeRetries). */
export const IDEMPOTENCY_WINDOW_MS = APPLIED_REQUESTS_KEPT_MS - NODE_REQUEST_TIMEOUT_MS - FAILOVER_RETRY_MS_MAX;
export const APPLIED_REQUEST_BYTES_PER_SLICE_MAX = 512 * 1024;
/** A slice node's leaders resend what their followers have not acknowledged, and their commit index, this often. */
export const REPLICA_TICK_MS = 100;
/** A leader resends to a follower that has records in flight and has not answered for this long at most (and at
 * least REPLICA_TICK_MS): its wait adapts to the round trips it measures (Replica.resendAfter, docs/replication.md,
 * "Heartbeats"), so a loaded node's answers are waited for rather than the window sent again. */
export const REPLICA_RESEND_MS_MAX = 500;
/** An eventually consistent read sent to a follower that has not answered after this long is read from the
 * leader instead: a frozen follower (SIGSTOP, cut off) keeps its connection open and nothing else notices it
 * (the coordinator watches leaders), so its reads would otherwise wait NODE_REQUEST_TIMEOUT_MS (30 s). */
export const REPLICA_READ_TIMEOUT_MS = 1_000;
/** A follower that let an eventual read time out (REPLICA_READ_TIMEOUT_MS) gets no eventual reads from that
 * router for this long; the next one after it is the probe. A frozen follower that leads nothing is never
 * replaced by an election, so without this every R-th eventual read would wait the timeout; five times the
 * timeout keeps a follower that was only slow for a moment (a long GC pause) out of turn briefly. */
export const REPLICA_SILENT_SKIP_MS = 5_000;
/** A follower answers an eventually consistent read only if it heard from the leader of the term it promised
 * within this long (by its own monotonic clock), else ReplicaNotReady and the router reads from the leader: a
 * follower cut off from its leader (or whose leader is frozen) but still reached by routers stops answering
 * after this long. So what it answers is at most this old, plus the time the leader's message was in flight. */
export const REPLICA_READ_STALENESS_MS = 3_000;
/** A leader tells the followers that hold everything (and get no heartbeat: docs/replication.md) that it still
 * leads this often, so that an idle follower stays readable. A third of the bound: one keep-alive may be lost,
 * or the leader's or the follower's thread may stall for up to a second (a loaded machine: see
 * docs/replication.md, "Staleness"), before a follower stops answering. */
export const REPLICA_KEEPALIVE_MS = REPLICA_READ_STALENESS_MS / 3;
/** A slice's leader answers a consistent read from its own store only while it holds a lease (docs/replication.md,
 * "Leases"): a majority of its replica set (itself counted) answered, at its term, a message it sent at time t, and
 * its monotonic clock says less than this long minus REPLICA_LEASE_DRIFT since t. A replica that promises a newer term
 * tells the coordinator how much of this is left since it last answered an older leader, and the coordinator waits
 * that out before it names a new leader (unless the old leader itself promised). Equal to LEADER_HEARTBEAT_TIMEOUT_MS:
 * a leader that died or froze had its followers' last answers about when the coordinator last heard from it, so by
 * the time the coordinator counts it gone by its silence its lease has nearly run out, and failover waits at most a
 * ping interval longer (a killed leader's link closes and the election starts at once, so that one waits for most of
 * the lease, unless the killed node's new process answers first). The part a leader uses (less REPLICA_LEASE_DRIFT) is at
 * least a keep-alive period plus two ticks (asserted in replica.ts: the next round of keep-alives comes up to a tick
 * late, and its answers need time back), so that an idle leader, whose followers answer its keep-alives, holds its
 * lease without a break. */
export const REPLICA_LEASE_MS = LEADER_HEARTBEAT_TIMEOUT_MS;
/** The part of a lease a leader does not use: monotonic clocks of two machines run at rates that differ by far less
 * than 5% (NTP slews at most 0.05%), and the lease is measured by the leader's clock and waited out by the follower's
 * and the coordinator's. */
export const REPLICA_LEASE_DRIFT = 0.05;
/** A consistent read on a leader whose lease lapsed (an idle leader whose keep-alive round was lost, or one cut off
 * from its followers) waits this long for the answers to a round of keep-alives it sends at once, and then answers
 * Unavailable (not applied), which a router retries on the leader the map names. Long enough for a round trip on a
 * loaded host; short against the router's FAILOVER_RETRY_MS_MAX. */
export const REPLICA_LEASE_WAIT_MS = 500;
/** A leader holds a write's answer until its record is committed (docs/replication.md, "What a client sees when a
 * leader loses its majority") at most this long, then answers it Unavailable, outcome unknown (it was proposed and may
 * still commit, under this leader or a later one): a leader whose followers are down, frozen or cut off, or that was
 * deposed without knowing it, would otherwise hold it until a router's NODE_REQUEST_TIMEOUT_MS (30 s). A failover's
 * usual length, not a bound on it (a slow leader gets LEADER_SLOW_TIMEOUT_FACTOR times the timeouts, an election may
 * start again): usually a leader the coordinator stopped hearing from is replaced by then (counted gone after the
 * heartbeat timeout, its successor elected within an election's timeout), so the router's resend, with the write's
 * request id, reaches the new leader and applies once; a leader that still leads then but cannot commit has no
 * majority that answers.
 * A commit takes milliseconds when a majority answers; one slower than this (a very loaded host) costs a resend that
 * the same leader answers from memory once committed. A read waiting for a commit gets the same bound (its lease has
 * REPLICA_LEASE_WAIT_MS). */
export const REPLICA_COMMIT_WAIT_MS = LEADER_HEARTBEAT_TIMEOUT_MS + LEADER_ELECTION_TIMEOUT_MS;
/** A leader without a lease sends such a round at most this often however many reads wait. */
export const REPLICA_LEASE_PROBE_MS_MIN = 20;
/** One Replicate frame carries at most this many [slice, message] entries (a sender batches what one
 * turn produced for one destination; more goes in further frames). */
export const REPLICATION_FRAME_ENTRIES_MAX = 4096;
/** A node's index in the cluster map is below this (checked in frames that name nodes); a peer's URL is at most this long. */
export const CLUSTER_NODE_INDEX_MAX = 65_536;
export const NODE_URL_CHARS_MAX = 2048;
/** What a node sends one peer node waits (while its links are dialed, or in their sockets to that node's workers) up
 * to this many bytes, shared out among its workers (each worker's link to the peer holds at most this divided by the
 * node's worker count); more is dropped (slice-worker/peer-links.ts): a node holds at most peers x this, whatever its
 * worker count, as it did when one link per peer node carried every worker's messages. */
export const PEER_LINK_QUEUE_BYTES_MAX = 64 * 1024 * 1024;
/** What a KeepAlive or AppendOk waiting in a peer link's queue counts against PEER_LINK_QUEUE_BYTES_MAX: the link
 * folds them into numbers only as it sends them (peer-links.ts byWorker), so while it is dialed each waits as its
 * message object and entry, not as its five numbers (40 bytes: what it was counted as, which let a link hold 3.4x its
 * share). Measured by bench/peer-queue-bytes.ts (node 20, as PEER_LINK_QUEUED_COPY_OVERHEAD_BYTES, the queue's slot
 * included): 151 to 162 bytes of V8's heap, 200 to 260 of the process's resident memory (40,000 and 100,000 queued);
 * counted near the top of the resident figure, as a message's bytes are. */
export const PEER_LINK_QUEUED_MESSAGE_BYTES = 256;
/** What a message's bytes waiting in a peer link's queue count against PEER_LINK_QUEUE_BYTES_MAX beside their length.
 * The link copies them out of the buffer they view (a worker's turn encodes its messages into one it shares:
 * writeAppend's 256 KiB arena, msgpackr's), so that a small message that waits does not keep that whole buffer
 * alive; the copy costs its own ArrayBuffer (on V8's heap, and its backing store and the C++ objects that hold it in
 * malloc's) and Uint8Array, and the queue's entry and slot. Measured by bench/peer-queue-bytes.ts (node 20; a real
 * link that dials a peer that never greets, 40,000 to 100,000 queued, each shape in a process of its own): V8's heap
 * and ArrayBuffers 258 to 276 bytes beside a message's length, the process's resident memory 480 to 650 (16 to 1,024
 * bytes long); counted near the top of that. */
export const PEER_LINK_QUEUED_COPY_OVERHEAD_BYTES = 640;
/** A worker's link to a peer node keeps its connection to the node (the one whose Hello names the peer's batch ports)
 * open but sends nothing on it: a ws ping this often keeps it open through middleboxes that close idle connections,
 * and a peer that vanished without a word (no FIN: a host gone, a cable cut) is noticed when the pong of the last
 * ping has not come by the next one: the link is dropped and dialed again. */
export const PEER_LINK_PING_MS = 5_000;
/** --remove-down-after-ms: a slice node down (not connected, or not heartbeating) this long is removed
 * as `keyslice remove` would, when that loses no slice's last copy or majority (docs/replication.md).
 * 0, the default: never automatically (a node that is only restarting or cut off for a while would lose
 * its replicas, which are then copied again). The smallest other value is a few leader timeouts. */
export const REMOVE_DOWN_AFTER_MS_DEFAULT = 0;
export const REMOVE_DOWN_AFTER_MS_MIN = 1_000;
/** A draining node's replica of a slice leaves the replica set only once every replica left holds the
 * new leader's barrier; the coordinator asks them (Ping) at most this often. */
export const REPLICA_CATCH_UP_PROBE_MS = 250;
/** Leadership rebalancing (--rebalance yes, R > 1): slices whose leadership is handed over at once (in one
 * map change; the next ones once all of them have their leader), and how long a handover routes the slice
 * to its new leader before the election, waiting for it to hold every record of the old leader (which then
 * gets no new writes) so that it wins the election's tie. At 8 (and a map change each), a node restarted
 * after a SIGKILL got its third of 1,024 slices back over tens of seconds, so under a kill every 3 s one node
 * led nearly all of them and each kill failed over all of them at once (bench/FAILOVER.md). */
export const LEADER_HANDOVERS_IN_FLIGHT_MAX = 64;
export const LEADER_HANDOVER_WAIT_MS_MAX = 1_000;
/** A change that takes out a replica that leads (a drain step, the second step of a replica move, `keyslice remove`
 * of a node that is up) first hands its leadership to a replica that stays (docs/replication.md, "Drain"), so that the
 * change is led on rather than elected: the handover's wait (LEADER_HANDOVER_WAIT_MS_MAX) and election take about a
 * second. Past this bound the change is made all the same and the slice elects, as without a handover (the log and
 * status say so: LeadersReport.handoversGivenUp). */
export const LEADER_HANDOVER_BEFORE_CHANGE_MS = 5_000;
/** Replica rebalancing onto a node that joins (R > 1, --rebalance yes): slices whose replica moves at once.
 * Each move changes the slice's replica set twice (a replica added, then the one it replaces dropped),
 * and each change was an election that deposed the leader for a moment (its uncommitted writes answer
 * with an unknown outcome), so a join under load moves a few slices at a time rather than all. A change
 * that keeps the leader now leads on (LeadOn, docs/replication.md) and deposes no one; each still costs
 * a catch-up of the new replica, so the bound stays. */
export const REPLICA_MOVES_IN_FLIGHT_MAX = 4;
/** Status lists at most this many of the slices whose drain step or replica move waits, each with why (the count of
 * all of them is given too): enough to name the nodes a drain waits for without a line per slice of a large cluster. */
export const REPLICA_WAITS_REPORTED_MAX = 8;
/** How long a drain makes no progress before keyslice drain says what it waits for (moves.waiting), and how often at
 * most it says it again when that changed: a drain that goes on shows only its progress bar. */
export const STALLED_SAY_WHY_MS = 5_000;
/** How long the keyslice command waits for the coordinator to answer one request (status, drain, remove, ...) before
 * it says it cannot reach it. Longer than any answer a coordinator that is up takes (a status asks every node for its
 * load, each bounded by NODE_REQUEST_TIMEOUT_MS only when a node hangs), short enough that a wrong --url is said. */
export const CLI_REQUEST_TIMEOUT_MS = 15_000;
/** How long keyslice add, drain and status --watch wait by default (--timeout, seconds), and the most they may be told
 * to: every wait of the command is bounded, so "Infinity" (or 1e400, which Number reads as it) is refused, not taken as
 * a wait without end. */
export const CLI_WAIT_S_DEFAULT = 3600;
export const CLI_WAIT_S_MAX = 7 * 24 * 3600;
/** A replica move (or a drain step) whose new replica's node has been down (not connected to the coordinator) this long
 * before the move completed is undone: the slice goes back to its old set, a drain's new replica placed on another node
 * that is up if there is one (coordinator/metadata/membership.ts undoStalledMoves).
 * Until then the slice runs as a set of R + 1 with one member down, so one more failure leaves it without a majority.
 * 5 s: a node restarted after a SIGKILL was ready again in 1.35 s (p50; 2.0 s at most) at load average 5 to 11
 * (bench/FAILOVER.md), so a restart lets its moves go on rather than be undone and copied again; at load 20 and more
 * restarts took 2 to 6 s, and a move may then be undone and made again later, which costs a copy, not data. Longer
 * would keep a slice one failure from losing its majority for longer. It is as long as NODE_HEARTBEAT_TIMEOUT_MS, but
 * counts from when the node counts as down: a frozen node that keeps its connection is down once it has been silent
 * for NODE_HEARTBEAT_TIMEOUT_MS, so its moves are undone about 10 s after it froze. */
export const REPLICA_MOVE_UNDO_DOWN_MS = 5_000;
/** A worker that has answered nothing since a question the coordinator asked it (a stuck worker while its node pongs;
 * OpenQuestions.unansweredSince, kept when its questions of a slice its node no longer replicates are dropped) takes no
 * new replica, by placement or replica rebalancing, until it answers one (asked again by a slice its node replicates on
 * it). Where its node replicates no slice on it, nothing can ask it: placement is let try it (the new replica's step
 * asks it) this long after it was found so, twice as long after each try it leaves unanswered (undone, as any step onto
 * it), up to STUCK_WORKER_RETRY_MS_MAX. As long as the heartbeat bound: one try per step undone and as long again, at
 * most. */
export const STUCK_WORKER_RETRY_MS_MIN = NODE_HEARTBEAT_TIMEOUT_MS;
/** 5 min: a worker stuck that long is broken, and one move a worker every 5 min is little churn; a worker that
 * recovers with nothing to ask it by waits at most this to take replicas again (one that can be asked is eligible at
 * its first answer). */
export const STUCK_WORKER_RETRY_MS_MAX = 5 * 60_000;
/** --move-undo-down-ms (keyslice coordinator): REPLICA_MOVE_UNDO_DOWN_MS set otherwise, at least this. Shorter undoes
 * the moves onto a node that only restarts more often (each copied again later); longer keeps a slice one failure from
 * losing its majority for longer. */
export const REPLICA_MOVE_UNDO_DOWN_MS_MIN = 1_000;
/** A drain replaces, in each slice it drains, a follower on a node that has been down (as the coordinator counts it,
 * from when it is seen down) this long, as keyslice remove of that node would (coordinator/metadata/membership.ts
 * drainReplicas): so that the drain does not end with slices it drained holding a replica that stays down while another
 * node is up to take it. Until then the slice's drain step waits, as a set of R + 1 with one member down (one more
 * failure leaves it without a majority until a node is back; nothing is lost). Unlike an undo (REPLICA_MOVE_UNDO_DOWN_MS),
 * which discards a new replica that had not caught up, this discards a full copy of the slice, which the new replica
 * then copies again from the leader: it waits past the restarts measured (1.35 s p50, 2.0 s at most at load 5 to 11;
 * 2 to 6 s at load 20 and more: bench/FAILOVER.md), with room, so that a node that only restarts keeps its replicas.
 * With --remove-down-after-ms set, the operator said how long a node may be down before its replicas are given up:
 * the drain waits at least that long too (membership.ts drainReplaceDownMs). A frozen node counts as down only once it
 * has been silent for NODE_HEARTBEAT_TIMEOUT_MS, so its replicas are replaced about 15 s after it froze. */
export const DRAIN_REPLACE_DOWN_MS = 10_000;
/** --drain-replace-down-ms (keyslice coordinator): DRAIN_REPLACE_DOWN_MS set otherwise, at least this (the floor
 * REMOVE_DOWN_AFTER_MS_MIN has; the wait is the longer of the two options). Shorter gives up the replicas of a node that only restarts more
 * often (each then copied again); longer keeps a slice one failure from losing its majority for longer. */
export const DRAIN_REPLACE_DOWN_MS_MIN = 1_000;
/** One heartbeat request gives up after this long. */
export const NODE_HEARTBEAT_REQUEST_TIMEOUT_MS = 2_000;

/** Slice moves: items per copy step, the default copy rate (items per second, all
 * moves together), moves at once, and when a move gives up. A move whose source
 * piles up more changes than MOVE_CHANGES_MAX between two reads is abandoned
 * (rolled back) rather than let the buffer grow without bound. */
export const MOVE_CHUNK_ITEMS = 1_000;
export const MOVE_ITEMS_PER_SECOND_DEFAULT = 20_000;
export const MOVES_IN_FLIGHT_MAX = 4;
export const MOVE_CHANGES_MAX = 200_000;
/** The same bound in bytes of changed items, checked by the source worker (a frame between processes must stay well under INTERNAL_FRAME_BYTES_MAX). */
export const MOVE_CHANGES_BYTES_MAX = 64 * 1024 * 1024;
/** A move step's changes and items as bytes (MoveRead's answer, MoveFreeze's, MoveApply's effects: shared/protocol.ts) at
 * most: MOVE_CHANGES_BYTES_MAX of changed items and a page of copied ones, as msgpack, whose headers and names add to
 * what itemBytes counts; the source gives the move up (InvalidState) rather than answer more, the target and the
 * coordinator refuse more (MalformedFrame), and it stays under INTERNAL_FRAME_BYTES_MAX with room. */
export const MOVE_EFFECTS_BYTES_MAX = 2 * MOVE_CHANGES_BYTES_MAX;
/** Catch-up reads before the freeze: stop when a read brings fewer changes than this, or after MOVE_CATCH_UP_ROUNDS_MAX reads. */
export const MOVE_FREEZE_CHANGES_MAX = 200;
export const MOVE_CATCH_UP_ROUNDS_MAX = 20;
/** A move still copying after this long gives up (rolls back). */
export const MOVE_TIME_MS_MAX = 10 * 60_000;
/** A failed move waits this long before the rebalancer tries that node again. */
export const MOVE_RETRY_DELAY_MS = 1_000;
/** An op refused with WrongOwner (its slice is switching owners, or a router's map lags) is retried by the Router
 * alone (coordinator/router/router.ts; load reports follow the same policy, shared/wrong-owner.ts): at most
 * WRONG_OWNER_RETRIES_MAX tries within WRONG_OWNER_RETRY_MS_MAX, waiting WRONG_OWNER_RETRY_DELAY_MS_MIN after the
 * first refusal and twice as long after each next one, up to WRONG_OWNER_RETRY_DELAY_MS_MAX (a router stops waiting
 * as soon as it has a newer map). So the first tries come quickly (a move's freeze lasts milliseconds) and the time
 * bound, not the count, is what ends the tries (the waits between 40 tries would add up to about 8.6 s, asserted in
 * wrong-owner.ts): a router cut off from its coordinator keeps asking for WRONG_OWNER_RETRY_MS_MAX, about 25 tries,
 * and so rides out a short loss of it (test/routers.test.ts: a 2.5 s cut). Callers above the Router (the client,
 * `keyslice export` and import) do not ask again: a WrongOwner that reaches them has spent these bounds
 * (callerMayRetry in shared/errors.ts). */
export const WRONG_OWNER_RETRIES_MAX = 40;
export const WRONG_OWNER_RETRY_MS_MAX = 5_000;
/** --wrong-owner-retry-ms (keyslice coordinator and keyslice router): the time bound above, set shorter. Shorter, a
 * router cut off from its coordinator answers WrongOwner sooner (a client of several routers then goes on to another
 * sooner) but rides out shorter cuts; at least WRONG_OWNER_RETRY_MS_MIN, a few times the longest wait between two
 * tries, so that a move's switch (which a router hears of within a refresh) is still waited out. Not longer: a write
 * sent again after an unknown outcome must come within what its replicas remember (APPLIED_REQUESTS_KEPT_MS). */
export const WRONG_OWNER_RETRY_MS_MIN = 1_000;
export const WRONG_OWNER_RETRY_DELAY_MS_MIN = 5;
export const WRONG_OWNER_RETRY_DELAY_MS_MAX = 250;

/** How long a coordinator waits at its start for its links to the slice nodes before its ready line says which are not
 * reachable yet (its routers serve meanwhile: a client's request waits ROUTER_LINK_FIRST_WAIT_MS for a node). */
export const CLUSTER_READY_WAIT_MS = 10_000;

/** /metrics and cluster status ask every node that is up for its load; a node that has
 * not answered after this long is left out of that answer (and marked so). */
export const LOAD_REPORT_TIMEOUT_MS = 2_000;
/** /metrics, the studio and cluster status ask for a table's load again once if a node refused it (WrongOwner: a slice
 * the map gave one of its workers had changed owners): at most this many tries in all (within WRONG_OWNER_RETRY_MS_MAX,
 * waiting as the Router does between them); if refused again, that answer is marked partial. DescribeSlices asks
 * again as often as the Router asks a scan page again (WRONG_OWNER_RETRIES_MAX within WRONG_OWNER_RETRY_MS_MAX). */
export const LOAD_REPORT_TRIES_MAX = 2;
/** Upper bounds of the request latency histogram (keyslice_request_duration_seconds), in
 * seconds: from 100 µs (a point read served in process) to 10 s (a full page of a scan). */
export const REQUEST_SECONDS_BUCKETS = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10] as const;
/** Load per slice is counted over a sliding window of this many one-second buckets. */
export const LOAD_WINDOW_SECONDS = 10;
/** Sharding keys tracked per table and worker for the hot-key list, and how many are reported. */
export const HOT_KEYS_TRACKED = 32;
export const HOT_KEYS_REPORTED = 10;
/** Optional capacity per slice and table, in ops per second; 0 means no limit (the default). */
export interface SliceCapacity {
  readsPerSecond: number;
  writesPerSecond: number;
}
/** DynamoDB's per-partition figures, for reference. */
export const DYNAMODB_PARTITION_READS_PER_SECOND = 3000;
export const DYNAMODB_PARTITION_WRITES_PER_SECOND = 1000;

/** Slice node durability: 'fsync' acknowledges a write once it is on disk
 * (fdatasync, shared by the writes of one batch); 'os' once the operating
 * system has it (survives a process crash, not a power loss). */
export const DURABILITY_MODES = ['fsync', 'os'] as const;
export type DurabilityMode = (typeof DURABILITY_MODES)[number];
export const DURABILITY_DEFAULT: DurabilityMode = 'fsync';
/** A worker writes a snapshot, and starts a new log segment, after this much log. */
export const SNAPSHOT_AFTER_LOG_BYTES = 64 * 1024 * 1024;
/** A worker's replica log (replicated slices) is checkpointed (each slice's applied state, then the records not
 * yet committed) once this much was written since the last checkpoint, or REPLICA_CHECKPOINT_LOG_FACTOR times the
 * checkpoint's size if that is more (--snapshot-after-bytes, when smaller, wins). A node restarts by reading its log
 * back, so its length bounds a restart: at 64 MiB, under repeated kills, the log of elections, barriers and writes grew to replay in seconds,
 * longer than the 3 s between kills (bench/FAILOVER.md); a checkpoint of the same state read back in a few ms. */
export const REPLICA_CHECKPOINT_AFTER_BYTES = 1024 * 1024;
/** Past REPLICA_CHECKPOINT_AFTER_BYTES, a replica log is checkpointed once this many times its last checkpoint's
 * bytes were written since (ReplicaLog.checkpointDue). Each compaction re-encodes every changed slice's items and each
 * checkpoint rewrites every slice's state, so what that costs per byte written is about 1 / this factor of the live
 * state's encoding; a restart reads back at most (1 + this factor) times a checkpoint, and replicas hold up to this
 * factor times a checkpoint of records in memory. 4 was measured against 2 (bench/README.md, "Compaction and
 * checkpoint share of an R=3 put"): no clear gain at R=3 on a shared host, and a restart's worst-case read-back of
 * the log more than twice as long, so 2 stays. */
export const REPLICA_CHECKPOINT_LOG_FACTOR = 2;
/** Before a checkpoint, a worker waits at most this long for each leader's prepared compaction (its store's state
 * at its last record, which runs ahead of the commit point under steady writes) to be committed and held by its
 * followers (SliceReplicas.prepareCompaction). Commit takes a round trip (ms, tens under load); a follower that is
 * down or frozen holds up the checkpoint no longer than this, and gets the snapshot once back. */
export const REPLICA_COMPACTION_WAIT_MS = 500;
/** Tries of a slice node to take its data folder's lock while other starts on the folder race it
 * (each lost race is another process that took the lock number first). */
export const DATA_FOLDER_LOCK_ATTEMPTS_MAX = 8;
/** Items per record in a snapshot file, at most. A record is the smallest piece of a snapshot step:
 * 256 items of ~200 bytes encode in about 1-2 ms here (1024 took 4-9 ms on the busy machine). */
export const SNAPSHOT_CHUNK_ITEMS = 256;
/** Item bytes per record in a snapshot file: a record ends at this many (or at SNAPSHOT_CHUNK_ITEMS
 * items), so that encoding one record stays short whatever the item size. */
export const SNAPSHOT_RECORD_BYTES_MAX = 256 * 1024;
/** A worker writes a snapshot in steps between its batches: each step encodes records for about
 * this long (at least one record), hands them to the file system and lets waiting batches run. A
 * replica-log compaction runs in steps of about this long too (at least one slice's state). */
export const SNAPSHOT_STEP_MS = 4;
/** A log append of many records (a replica-log checkpoint: a record per slice, each its whole state) hands them to
 * the file system in writes of about this many bytes (a record larger goes alone), then syncs once: the records of
 * a whole checkpoint in one buffer held twice the worker's replicated state at once (framed, then joined). */
export const LOG_WRITE_BYTES_MAX = 4 * 1024 * 1024;
/** A log segment moved aside at start ('os' mode, after a power loss: slice-worker/wal.ts) gets the first free name of
 * `<segment>.cut`, `.cut-1`, ... up to this many; past it the start fails rather than rename over an earlier one. */
export const LOG_MOVED_ASIDE_NAMES_MAX = 1000;

/** The DynamoDB-compatible endpoint (coordinator/dynamodb/): DynamoDB's own limits and rules. */
/** A read unit covers 4 KB of item (half a unit when eventually consistent), a write unit 1 KB. */
export const DYNAMODB_READ_UNIT_BYTES = 4096;
export const DYNAMODB_WRITE_UNIT_BYTES = 1024;
/** BatchGetItem answers at most this much; the keys past it come back as UnprocessedKeys. */
export const DYNAMODB_BATCH_GET_RESPONSE_BYTES_MAX = 16 * 1024 * 1024;
export const DYNAMODB_TOTAL_SEGMENTS_MAX = 1_000_000;
export const DYNAMODB_LIST_TABLES_LIMIT_MAX = 100;
/** A SigV4 signature is refused when its time is further than this from the coordinator's clock. */
export const DYNAMODB_SIGNATURE_SKEW_MS_MAX = 15 * 60_000;
/** SigV4 signing keys (one per secret, day, region and service) kept so that a request is checked with one HMAC
 * rather than five, each only once a signature made with it held; past this many the kept ones are dropped (a client
 * signs with one key per day). */
export const DYNAMODB_SIGNING_KEYS_MAX = 64;
/** DynamoDB's numbers (the N type): at most this many significant digits, and the
 * exponent of the first one (d.ddd x 10^e) within these bounds. */
export const DYNAMODB_NUMBER_DIGITS_MAX = 38;
export const DYNAMODB_NUMBER_EXPONENT_MAX = 125;
export const DYNAMODB_NUMBER_EXPONENT_MIN = -130;
/** Random bytes of a request id (x-amzn-requestid): 52 characters of base64url, as long as DynamoDB's. */
export const DYNAMODB_REQUEST_ID_BYTES = 39;

/** The studio (GET /): the coordinator samples the cluster and every table once per
 * STUDIO_SAMPLE_MS, one sample shared by all viewers, while a viewer is connected and
 * STUDIO_LINGER_MS after the last one leaves. The heat map's history keeps
 * STUDIO_HISTORY_SECONDS of samples, fewer when they would hold more than
 * STUDIO_HISTORY_CELLS_MAX slice figures (100 tables of 1024 busy slices: ~20 s). */
export const STUDIO_SAMPLE_MS = 1000;
export const STUDIO_LINGER_MS = 5 * 60_000;
export const STUDIO_HISTORY_SECONDS = 300;
export const STUDIO_HISTORY_CELLS_MAX = 2_000_000;
/** Viewers of the live stream at once, and the output one slow viewer may have queued before it misses samples. */
export const STUDIO_VIEWERS_MAX = 64;
export const STUDIO_VIEWER_BUFFER_BYTES = 4 * 1024 * 1024;
/** Samples of each table's top key the studio remembers, to judge a time-ordered key. */
export const STUDIO_TRAIL_SAMPLES_MAX = 120;

// ---- the key-design advisor (keyslice advise, the Advise operation) ----------

/** Sample items in one Advise request: the coordinator judges them on its event
 * loop, so a request is kept to a fraction of a second of work. */
export const ADVISE_ITEMS_MAX = 10_000;
/** Access-log entries in one Advise request. */
export const ADVISE_ACCESS_ENTRIES_MAX = 50_000;
/** keyslice advise without a cluster streams the sample and judges at most this
 * many items (--max-items): memory grows with the distinct keys it counts. */
export const ADVISOR_SAMPLE_ITEMS_DEFAULT = 100_000;
export const ADVISOR_SAMPLE_ITEMS_MAX = 2_000_000;
/** A "moment": this many consecutive writes, about what a busy cluster has in
 * flight at once (the load bench runs 50); a key that takes a large share of
 * each moment's writes is hot while it is current, even if it is not overall. */
export const ADVISOR_MOMENT_WRITES_DEFAULT = 100;
/** A sharding key is hot when it takes at least this share of the writes (or
 * reads), overall or of a moment, and at least ADVISOR_HOT_KEY_OVER_MEAN times
 * its fair share (so that 8 equally busy keys are low cardinality, not hot). */
export const ADVISOR_HOT_KEY_SHARE = 0.1;
export const ADVISOR_HOT_KEY_OVER_MEAN = 10;
/** Low cardinality: fewer stored sharding keys than sliceCount / this, so at
 * most that fraction of the slices can ever hold items. */
export const ADVISOR_LOW_CARDINALITY_SLICE_DIVISOR = 4;
/** A cardinality is judged only when the sample saw each value this many times
 * on average (fewer: the sample may simply be too small to see more values). */
export const ADVISOR_CARDINALITY_SAMPLES_PER_VALUE = 4;
/** Monotonic: |Spearman correlation of key order with insertion order| at least
 * this (MongoDB's analyzeShardKey uses 0.7 for its recordId correlation). */
export const ADVISOR_MONOTONIC_CORRELATION = 0.7;
/** Items kept (every k-th, k doubling) to estimate monotonicity. */
export const ADVISOR_MONOTONICITY_SAMPLE_ITEMS = 8192;
/** Even-distribution bucket counts the advisor tries. */
export const ADVISOR_BUCKET_CHOICES: readonly number[] = [4, 16, 64];
/** Attributes tried as an added sharding column, and how many such designs are shown. */
export const ADVISOR_CANDIDATE_COLUMNS_MAX = 4;
export const ADVISOR_MULTI_COLUMN_DESIGNS_SHOWN = 2;
/** A string attribute longer than this is a payload, not a key column candidate. */
export const ADVISOR_CANDIDATE_VALUE_BYTES_MAX = 64;
/** The size at which a partition (all items of one stored sharding key) is too
 * large: DynamoDB's item-collection limit; YDB splits partitions at 2 GB. */
export const PARTITION_BYTES_ADVISED_MAX = 10 * 1024 ** 3;
/** A slice holding more items than a move copies within MOVE_TIME_MS_MAX at the
 * default rate cannot be moved off its node (a drain of it gives up). */
export const SLICE_MOVABLE_ITEMS_MAX = (MOVE_ITEMS_PER_SECOND_DEFAULT * MOVE_TIME_MS_MAX) / 1000;

// ---- keyslice import and export ---------------------------------------------

/** BatchWrite requests in flight (--parallel). */
export const IMPORT_PARALLEL_DEFAULT = 8;
export const IMPORT_PARALLEL_MAX = 256;
/** A throttled write or page, or one Unavailable that the router did not wait out (a slice of one replica whose node
 * is down: coordinator/cli/cli-retry.ts), is sent again at most this many times, waiting twice as long each time
 * (with jitter), from the least to the most delay: the waits add up to 4-8.5 s, to ride out a node's restart. */
export const IMPORT_RETRIES_MAX = 10;
export const IMPORT_RETRY_DELAY_MS_MIN = 20;
export const IMPORT_RETRY_DELAY_MS_MAX = 2_000;
/** ...and not later than this after its first try: tries that each wait long for their answer (a node that does not
 * answer, NODE_REQUEST_TIMEOUT_MS a try) are not sent again for minutes. Longer than the waits above, so that quick
 * refusals are ended by the count. */
export const IMPORT_RETRY_MS_MAX = 15_000;
/** Orders other than as-is index the whole file first (a key and a byte range per
 * item, not the items): at most this many items. */
export const IMPORT_INDEXED_ITEMS_MAX = 20_000_000;
/** One line (one CSV record) of an item file. */
export const IMPORT_LINE_BYTES_MAX = 2 * ITEM_BYTES_MAX;
/** Progress lines when stderr is not a terminal: one every this long. */
export const PROGRESS_LINE_INTERVAL_MS = 5_000;
/** export: parallel-scan segments (--parallel) and items per page. */
export const EXPORT_SEGMENTS_DEFAULT = 4;
export const EXPORT_PAGE_ITEMS = 1_000;


// Routers (coordinator/router/): the request path in processes of its own, fed the
// catalog and cluster map by the coordinator (GET /cluster/feed, a long poll).
/** The coordinator holds a feed request this long when nothing changes, then answers the state as it is. */
export const ROUTER_FEED_HOLD_MS = 20_000;
/** A router waits this long for a feed answer (hold plus slack) before it counts the coordinator as lost. */
export const ROUTER_FEED_TIMEOUT_MS = 25_000;
/** Between two failed feed requests a router waits this long (the coordinator may be restarting). */
export const ROUTER_FEED_RETRY_MS = 250;
/** A request a router forwards to the coordinator (table and /cluster/ requests) fails after this long. */
export const ROUTER_FORWARD_TIMEOUT_MS = 30_000;
/** After a forwarded change, a router answers once its own copy has the change, or after this long. */
export const ROUTER_APPLY_WAIT_MS = 5_000;
/** A router whose batch was refused WrongOwner asks the coordinator for the map at once, at most this often. */
export const ROUTER_REFRESH_INTERVAL_MS_MIN = 50;
/** A scan on a router waits at most this long for a slice between freeze and switch (a move's last step). */
export const ROUTER_FROZEN_WAIT_MS = 5_000;
/** A router's request for a node its link has not reached yet since the router started (never
 * ready: say, the whole cluster is coming up, or the node just joined) waits this long for it
 * before Unavailable; a node that was reached and is down answers Unavailable at once. */
export const ROUTER_LINK_FIRST_WAIT_MS = 5_000;
/** How often `keyslice coordinator --routers N` starts a router again that died, at most (per router slot). */
export const ROUTER_RESTART_DELAY_MS = 500;
/** The floor of the old generation's allocation limit (V8's --initial-old-space-size, MiB) of the processes that run
 * the request path: the routers a coordinator forks, and those local-cluster.ts starts (a standalone router, a
 * coordinator at --routers 0, which ran the same storm: bench/PROFILE.md, "the client's, the nodes' and a --routers 0
 * coordinator's major GC"). Below it V8 starts no full collection for the heap's own growth. Measured: with V8's
 * defaults a router under range load ran a mark-compact every 0.2-1 s, more of them than scavenges, with its old
 * generation at about 11 MiB live and not growing (limit 35 MiB); with the floor, 7 per 100k ops of range instead of 230 (bench/PROFILE.md, "the
 * router's major GC"). Why, inferred from the GC traces, not read in V8's source: the ArrayBuffers it reads and drops
 * (its sockets' reads, ws's joined frames) count against that limit until a collection frees them. The cost: up to
 * this much old space before a mark-compact. A later --initial-old-space-size in the coordinator's own command-line
 * Node options overrides it (V8 takes the last; Node refuses the flag in NODE_OPTIONS). Not given to a coordinator or a
 * router an operator starts by hand (docs/operations.md, "Routers"), nor to the slice nodes, which ran almost no
 * mark-compacts. */
export const ROUTER_OLD_SPACE_FLOOR_MB = 64;
/** The bench's client processes' floor (bench/scale.ts spawns them with it), for the same reason as the routers': with
 * V8's defaults a bench/load.ts client ran 107 mark-compacts per 100k range ops (6-8 per 100k puts or gets) against 3.7
 * with the floor, and 37 against 2.9 under interleaved put/get/range, its CPU per op 0.80-0.85x (bench/PROFILE.md, "the
 * client's, the nodes' and a --routers 0 coordinator's major GC"). A user's process running KeysliceClient can give
 * itself the same (docs/client.md). */
export const CLIENT_OLD_SPACE_FLOOR_MB = 64;
/** Node's option that gives a process's old generation the floor `mib` (V8's --initial-old-space-size): Node refuses it
 * in NODE_OPTIONS, so it goes on the command line of each process that is to have it, and V8 takes the last given. It
 * reaches the process's worker threads too (a Worker's resourceLimits has no initial size, and its execArgv refuses it). */
export const oldSpaceFloorOption = (mib: number): string => `--initial-old-space-size=${mib}`;
/** The most router processes one coordinator starts. */
export const ROUTERS_MAX = 64;
/** `keyslice coordinator --routers` by default: one router per four cores, at least one and at
 * most 8. Measured on 2 cores (docs/operations.md#routers): one router served puts about 1.7x
 * faster than the coordinator alone and gets alike, two were slower than none (more busy
 * processes than cores); on many cores the rest is left to the slice nodes' workers. */
export function routersDefault(cores: number): number {
  return Math.max(1, Math.min(8, Math.floor(cores / 4)));
}
