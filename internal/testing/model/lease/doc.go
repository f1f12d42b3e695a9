// Package lease is a machine-checked model of raftlock's lease protocol:
// a pure state machine of clients, sessions, keepalives, leaders and leader
// changes, lock-delays, the token counter, operator actions and clock
// rates, at the level of the design (docs/guarantees.md); an
// exhaustive checker of every interleaving within stated bounds; the
// properties P1–P6 and liveness; a mutant for every property; today's
// design (main at 546bfcd) with the defects the model finds in it; and the
// design of the fixes of issue 45 items 4, 7, 8 and 9, which the node and
// lockapi are to follow. Changes to lease timing, expiry, grace, lock-delay
// or Unlock's meaning are made here first.
//
// # The model
//
// Time is discrete: a tick is the unit (with DefaultParams, TTL is 20
// ticks; with a 4.5 s TTL a tick is 225 ms). A State holds only relative
// times — countdowns to deadlines and ages since events, capped where
// larger values behave alike — so the state space is finite without a
// horizon and two states that differ only in when they happen are one.
//
// Clocks. The slowest clock runs at the rate of real time, the fastest at
// 1 + ε (Params.EpsNum/EpsDen): a duration d timed on a fast clock lasts
// floor(d/(1+ε)) ticks of real time (rounded down: never kinder than the
// clock). Clients are taken slow (their windows last longest), every
// leader is elected slow or fast. Offsets and steps of wall clocks matter
// only where a design reads a wall clock (the lock-delay mutant, the token
// floor): leaders get a wall offset of ±Params.Wall.
//
// Clients (ClientKind). A Lease client is a lockapi Session: it sends
// keepalives whenever it likes (any schedule, so a pause of any length at
// any step), counts its window as send time + TTL − margin of its last
// acknowledged keepalive (client.V), and when the window runs out it is
// lost; a lost client may send Session.lose's CloseSession and may call
// Lease.Unlock on its lost lease (releaseAfterEnd). A Keeper is an HTTP
// client's client-kept lease (the admin API's handles): its window is also
// bounded by the time by which the HTTP client must ask again
// (client.Keep), and the keeper releases the lease when it does not. An
// Immortal session's keepalives are not modelled (a waiter; the clients of
// the state-machine properties). Clients open sessions, acquire (Lock),
// unlock, withdraw a wait, close; their commands reach the leader, may be
// dropped by a leader change (and are then proposed again) or survive it.
//
// Keepalives travel as messages (ka) that a network may lose at any stage
// or delay up to Params.MaxAge ticks: sent; received by the leader, which
// refuses it if the session's deadline has passed or its expiry is
// proposed (expiryManager.checkMany) and otherwise starts a leadership
// confirmation; confirmed — the deadline moves to arrival + TTL on the
// leader's clock (expiryManager.keepAliveMany); the reply reaches the
// client, whose window moves to send time + TTL − margin
// (Session.renewed). A confirmation under way when its leader is deposed
// may still complete (its evidence arrived late); a deposed leader may
// also acknowledge keepalives that arrive up to Params.StaleAck ticks
// after the next election (evidence older than the keepalive: item 7).
//
// Leaders. Raft is abstracted to what the lease protocol sees: one leader
// at a time proposes entries, which commit in order (Action aCommit) and
// are applied by every replica at once; a leader may be deposed at any
// time (bounded by Bounds.Changes), and any prefix of its uncommitted
// entries survives into the next leader's log, committed by that leader's
// takeover barrier. A new leader proposes its barrier (a Tick), reads the
// sessions and its clock when the barrier is applied (phaseRead), and
// installs deadlines and lock-delay timers (expiryManager.takeOver); until
// then it serves no keepalive. A leader proposes ExpireSessions at a
// session's deadline and EndDelay when a lock-delay's time is up
// (expiryManager.expire, endDelays).
//
// The replicated state machine (machine) holds sessions and one lock
// (exclusive, or a semaphore of Bounds.Limit permits) with its FIFO queue,
// holder tokens, the grant counter, the lock-delay (delayed, its token),
// the exactly-once table (ack floor and executed requests per session,
// fsm's applier.once), a backup for restores, and — in the fixed design —
// whether each session was renewed since the latest takeover marker.
// Revoke (ends a grant, lock-delay kept), EndSession (ends a session,
// no lock-delay), Restore (a replicated command: sessions replaced, the
// counter the larger of the two) and Rebuild (a new cluster from empty
// data dirs, whose leaders raise the counter to their wall clock) are the
// operator actions.
//
// # The checker
//
// Check explores every state reachable from the initial states, breadth
// first, so a counterexample is a shortest schedule (Result.Schedule prints
// it, numbered, with the state after each step). States are stored as
// 64-bit fingerprints (hash compaction, as TLC does: two states share one
// with probability about n²/2⁶⁵, below 10⁻⁵ at 10⁷ states) with the
// parent and action of each, from which a schedule is replayed. Reductions,
// each sound for the properties:
//
//   - relative, capped times (above);
//   - dead variables cleared (normalize): ages that only a takeover reads
//     once no leader change is left, the silence of an ended session;
//   - tokens renumbered 1…n in order (they are only compared), except in
//     rebuild configurations, whose tokens are compared with wall clocks;
//   - leader duties done at once (step.due): a leader proposes an expiry
//     or an EndDelay when it is due and installs its takeover as soon as it
//     has read (except with Bounds.SlowTakeover). A leader that does these
//     later only grants later, with the same deadlines — its schedules are
//     covered by the prompt leader's (a keepalive it refuses meanwhile is
//     one the network could drop) — while keepalive confirmations, commits
//     and client steps keep every delay.
//
// Symmetry reduction was not needed: in the configurations, clients play
// distinct roles (the holder, the waiters in FIFO order, different
// permits).
//
// Timely configurations (Bounds.Timely) add the bounds that liveness
// needs: a leader's entry commits within Params.Commit ticks unless the
// leader is deposed; the cluster is never without a leader that has taken
// over for more than Params.Outage ticks; a leader that has taken over
// leads for at least Params.MinLead ticks (> Commit: long enough to commit
// what it proposes at once). Without the last, leaders deposed as soon as
// they take over commit nothing, and nothing can be bounded.
//
// # Properties
//
//   - P1: no grant of the lock while another client's window on it is
//     open (for a semaphore: while the permits of open windows and the
//     grant exceed the limit), except windows an operator action
//     (revoke, end-session, restore, rebuild) took away.
//   - P2: every grant's token is above every token granted before,
//     across leader changes, restores and rebuilds; across a rebuild within
//     the stated bound (fewer grants than tokensPerTick in any tick, the new
//     cluster's leaders' wall clocks not behind the old cluster's), and
//     except a new cluster's grants before its first RaiseTokens commits —
//     the exception docs/guarantees.md states ("Fencing tokens").
//   - P3: when a holder's window ends because it ran out (validity, the
//     HTTP client's window, or a refused keepalive) — whoever notices it,
//     client, HTTP keeper or leader — nothing is granted for the shortest
//     lock-delay a correct leader times (floor(LockDelay/(1+ε))), except
//     when an operator ends the session or restores.
//   - P4 (Timely): a session that a leader last heard from T ticks ago is
//     expired within Params.Bound4, whatever the number of leader changes.
//   - P5: an acquisition whose release (or withdrawal) the machine applied
//     is never executed or granted again (by a duplicate delivery).
//   - P6: a semaphore's permits in use never exceed its limit, and a grant
//     goes to the head of the queue (the FIFO head is never overtaken).
//   - Live (Timely): once the lock has waiters and no holder (it is free,
//     delayed, or its head does not fit), the head is granted within
//     Params.BoundLive.
//
// # Results
//
// Catalogue lists the checks; TestCatalogue runs them. At ScaleCI
// (DefaultParams: TTL 20, margin 1 = TTL/20, election timeout 2, lock-delay
// 3, ε 5 %; SmallParams: TTL 10, margin 1, ε 10 %, for the checks whose
// subject is not the margin; MaxAge 2; Commit 1, Outage 3, MinLead 2):
//
//	check                          bounds                          states  verdict
//	fixed/lease                    1 change, 1 keepalive in flight    75 k  holds
//	fixed/lease-no-delay           as above, no lock-delay            43 k  holds
//	fixed/keeper                   no change                          92 k  holds
//	fixed/churn                    3 changes, Timely                 207 k  holds; worst silence 33 = Bound4, worst wait 8 = BoundLive
//	fixed/open-during-takeover     1 change, slow takeover           318 k  holds
//	fixed/operator                 1 revoke, 1 end-session           239 k  holds
//	fixed/restore                  a backup restored                  35 k  holds
//	fixed/rebuild                  horizon 2 ticks, 1 change         266 k  holds
//	fixed/exactly-once(-contended) 1 duplicate a session          4 k/23 k  holds
//	fixed/semaphore                limit 2, permits 1, 2, 1           98 k  holds
//
// and every today/, mutant/ and exception/ check finds its counterexample,
// of 2 to 42 steps, within 14 to 950 thousand states
// (exception/operator-overlap also shows that the operator actions' overlap
// is reached, and is what the documented exception covers). In all about
// 3.6 million states in 7 s. Under the race detector — CI's go test -race —
// the catalogue runs at ScaleRace (smaller bounds for the open, operator
// and renewed-in-state checks, 2 changes for fixed/churn): about 2.1
// million states; the whole package takes 45 s of CPU, 65 to 115 s on the
// shared 2-core machine by its load. ScaleDeep (RAFTLOCK_MODEL_DEEP=1, in
// the chaos long run: 3 changes and 2 keepalives in flight for
// fixed/lease, 7 changes for fixed/churn, 1 change for keeper, operator and
// restore, a 4-tick rebuild horizon, 2 acquisitions for the semaphore and
// duplicates) explores about 21 million states in about a minute (up to
// 0.9 GB of memory); its worst silence and wait stay at Bound4 and
// BoundLive. TestBoundsAreReached shows both bounds exact (one tick less
// is broken); TestRateThreshold shows P1 holding for
// ε ≤ margin/(TTL − margin) = 1/19 and broken at 6 %;
// TestStaleEvidenceThreshold shows how much stale evidence the election
// timeout in the grace absorbs.
//
// # What the model found in today's design
//
// Issue 45 item 4 (today/lose-close, today/keeper): a holder whose window
// lapses at t = 19 sends Session.lose's CloseSession; it commits at t = 19
// and hands the lock to the waiter with no lock-delay — the lapsed
// holder's in-flight writes are not drained. The HTTP keeper's release of
// an unrenewed client-kept lease (handles.expireUnrenewed → Lease.Unlock)
// does the same, while the session is still valid.
//
// A third path, not named in the issue (today/unlock-lost; item 4's fix on
// main covers it too): Lease.Unlock of a
// lease whose session was lost proposes a plain Release
// (Lease.releaseAfterEnd, "in case the cluster still has it"); when it
// commits before the leader's expiry it hands the lock over at once,
// skipping the delay exactly as the close does. Session.Close and
// Lease.Unlock called after the deadline but before the watch goroutine
// noticed it (Session.Close does not call checkDeadline) are the same.
//
// Issue 45 item 9 (today/churn, 42 steps): the holder is last heard at
// t = 0; its leader is deposed at its deadline (t = 10, before the expiry
// commits); the next takes over at t = 13 and gives every session
// TTL + election timeout again (deadline t = 25); it too is deposed at
// its deadline; the third takes over at t = 28 (deadline t = 40): at
// t = 34 the session has been silent beyond the fixed design's bound, and
// k changes spaced below TTL + election timeout keep it alive for ever.
//
// Not in the issue (today/delay-churn, 25 steps): every new leader times a
// pending lock-delay again in full from its takeover
// (expiryManager.endDelays: "afresh and in full"). The delay starts at
// t = 10; the leader is deposed at t = 13, before it proposes EndDelay;
// the next takes over at t = 16 and waits 3 ticks more; a deposition at
// each end keeps the lock from its waiter as long as the churn lasts —
// the lock-delay's etcd#9888. "A failover can extend a delay, never
// shorten it" is true, but the extension has no bound.
//
// Issue 45 item 8 (today/open-during-takeover, 25 steps): a new leader's
// barrier is applied and takeOver reads the sessions and its clock at
// t = 0, then stalls (its goroutine starved, or the heap of a million
// sessions); at t = 10 a client opens a session, it commits, the install
// replays the open with the clock read at t = 0: deadline t = 10, due at
// once; the client takes the lock, the leader expires the session, and the
// next client is granted the lock at t = 10 while the first one's window
// runs to t = 19.
//
// Issue 45 item 7 (today/stale-evidence, 29 steps, and the derivation
// below): a leader deposed at t = 0 acknowledges a keepalive that arrives
// at t = 2 on stale evidence; the new leader (clock 5 % fast) gives the
// session a grace to t = 20; the client's window runs to t = 21; the
// waiter is granted at t = 20. The model's threshold
// (TestStaleEvidenceThreshold): the grace's election timeout absorbs
// evidence up to about ElectionTimeout + margin − ε·(TTL + ElectionTimeout)
// older than the next election, in real time
//
//	StaleAck ≤ (TTL + ElectionTimeout)/(1 + ε) − (TTL − margin).
//
// How old can hashicorp/raft v1.7.3's evidence be? Raft.verifyLeader
// registers the verify future with every follower's replication; the
// first successful reply processed after that — by the heartbeat
// goroutine (Raft.heartbeat → followerReplication.notifyAll(resp.Success))
// or the replication goroutine (Raft.replicateTo → updateLastAppended →
// notifyAll(true); also installSnapshot and Raft.pipelineDecode) — votes
// for it, whatever the time its request was sent or processed. A
// follower's evidence is the time f at which it processed that request.
// The leader stays leader while a quorum's replies keep arriving within
// LeaderLeaseTimeout of each other (Raft.checkLeaderLease; a reply counts
// as contact whenever it arrives). After a follower processed its last
// request of the old term (at p), at most 1 + max(1, MaxRPCsInFlight)
// successful replies per follower are still in flight (one heartbeat and
// the replication's requests; raftlock sets MaxRPCsInFlight 1); with 3
// voters either follower's replies keep the lease, so the old leader can
// stay leader, and count such replies as votes, until about
// p + 2·(1 + 1)·LLT = p + 4·LeaderLeaseTimeout, each reply delayed by up
// to that (the transport's deadline is RaftTimeout, 10 s). The next
// election follows p by H: HeartbeatTimeout when followers wait for their
// heartbeat timer (Raft.runFollower), but 0 after a leadership transfer
// (Raft.requestVote grants with LeadershipTransfer set despite a known
// leader; raftlock transfers on Close, Leave and halt) or a follower's
// restart (no known leader). So StaleAck = 4·LLT − H: with LANTiming
// 1600 − 500 = 1100 ms (1600 ms with a transfer) against about
// ElectionTimeout + margin = 500 ms + TTL/20 at equal clock rates —
// broken for every TTL below 12 s (22 s with a transfer), the default
// 10 s included, and for any TTL once the rates differ by the full 5 %;
// FastFailoverTiming: 1000 − 300 = 700 ms against 300 ms + TTL/20. The
// reviewer's "not exploitable with MaxRPCsInFlight 1 and heartbeat >
// leader lease" assumed one stale reply; the lease check lets several
// chain.
//
// Two rules of today's design turn out to be defence in depth, not
// needed for P1 with the margin: refusing a keepalive received after the
// deadline, and refusing one whose expiry was proposed while it was being
// confirmed — with W < TTL the client has always lapsed by then. They
// matter only if the rates exceed ε.
//
// # The design of the fixes
//
// The catalogue's fixed/ checks run this design (Fixed, with
// Params.StaleAck 0); each rule below has a mutant or a today/ check that
// fails without it.
//
// Item 4 — a lapse keeps its lock-delay (Variant.LapsedEnd; mutants
// close-skips-delay, today/lose-close, today/unlock-lost, today/keeper).
// This rule has landed on main as the model states it (package fsm's
// lapsed forms of CloseSession and Release, lockapi's Session.Abandon and
// its deadline checks, admin's abandoned client-kept sessions):
//
//   - Log: CloseSession and Release carry Lapsed (cluster version 4).
//   - FSM: a Lapsed CloseSession or Release ends the session's (or the
//     owner's) exclusive grants with expiry semantics: a grant of a session
//     with a lock-delay enters it (EventReleased with DelayFor and
//     DelayToken, as ExpireSessions does); shared grants and waits end at
//     once.
//   - lockapi: a command is Lapsed when it is sent at or after the
//     session's deadline (now ≥ validUntil, read when it is sent) or after
//     the session was lost: Session.lose's CloseSession, an Unlock of a
//     lost lease, a Close or Unlock called after the deadline before the
//     watch goroutine noticed it.
//   - admin: a client-kept lease whose HTTP client did not ask in time is
//     released with expiry semantics.
//   - Below version 4 main writes the plain forms: during a rolling
//     upgrade a lapse that the client notices first releases without the
//     delay (today/lose-close). Sending nothing then, and letting the
//     leader expire the session, would keep P3 at the cost of up to a
//     margin's wait.
//
// Item 7 — confirmations rest on fresh evidence (Params.StaleAck 0;
// mutant stale-confirmation, today/stale-evidence). The Config-only route
// would need 4·LeaderLeaseTimeout ≤ ElectionTimeout + TTL/20 with H = 0
// (transfers and restarts), which LANTiming, FastFailoverTiming and
// nodeopts.TestTiming all break; so:
//
//   - Rule: a keepalive received at a is confirmed only by a quorum of
//     voters (the leader counting itself) that each processed, after a, a
//     message of raftlock's own: ConfirmTerm{term} (a node-to-node message,
//     cluster version 4). A voter answers with raft's CurrentTerm() (and
//     that it is not the leader); the leader counts the answers equal to its
//     term. A voter whose term was T when it processed the request after a
//     had not voted in a later term, and every later election needs one of
//     the quorum: so every later leader is elected after a.
//   - The verifier keeps its batching (one round serves every keepalive
//     received before the round's requests are sent); the request/response
//     pairing of the RPC is the round counter.
//   - Below version 4, and for a leader of the previous release in a
//     rolling upgrade, keepalives are confirmed by VerifyLeader as today:
//     the grace keeps its election timeout (below) for them.
//   - A keepalive of a marked session (item 9) needs no round: the commit
//     of its Renewed entry, after a, is the evidence.
//
// Item 8 — the takeover times each replayed session when it replays it
// (Variant.ReplayTime; today/open-during-takeover). In
// expiryManager.takeOver the events recorded while it read
// (m.takeover) are replayed with time.Now() read under m.mu at the replay,
// not the now read after SessionTTLs: a replayed open gets
// replay time + TTL, which is after its commit and so after its client
// sent it.
//
// Item 9 — a silent session ends within a bound, whatever the number of
// leader changes (Variant.RenewPerTerm; mutants grace-reset-unbounded,
// ack-before-renewed, renewed-in-state, today/churn).
//
//   - FSM state (cluster version 4, in snapshots): per session
//     renewedAt, the index of the last entry that renewed it in the log
//     (its OpenSession, its latest Renewed entry, or the Restore that
//     created it); the indices of the takeover markers applied — at
//     version 4 the leader's takeover barrier is a command of its own,
//     fsm.Takeover, and is the marker (not a Tick: a version-1 lock-delay
//     Tick applied after the version was raised would be a marker in the
//     middle of a leader's term, after acknowledgements it did not
//     record) — at least those after the smallest renewedAt (at most a
//     configured number,
//     64: a session whose first marker was pruned uses the oldest kept,
//     which is later: safe). A session is marked when a marker follows its
//     renewedAt; its origin is the first such marker.
//   - Log: Renewed{Sessions} (LeaderOnly, version 4, at most
//     MaxExpireSessions a command): renewedAt = the entry's index for each
//     live session named.
//   - Every replica, in memory (not in the log or snapshots): the
//     monotonic time at which it applied each marker still kept (the
//     node's apply hook, node.applyTimes; after a restart the replay time,
//     after a snapshot install the install time — both later, so safe).
//   - Leader, keepalive of a marked session: propose Renewed for it
//     (gathered with the other marked sessions' keepalives, like group
//     commit, or on a small periodic entry), wait for the commit of that
//     entry — its own proposal's result (the Apply future), not the state
//     machine showing the session renewed — then set deadline =
//     received + TTL and acknowledge. Never acknowledge before the commit
//     (mutant ack-before-renewed: a later leader's origin would predate the
//     acknowledgement), nor on another leader's Renewed entry (mutant
//     renewed-in-state: a deposed leader whose entry was dropped sees the
//     next leader's commit and acknowledges a keepalive the log never
//     recorded; the deep bound found this in the model's first version of
//     the rule). An unmarked session's keepalive: item 7's confirmation.
//     The refusals stay (deadline passed at arrival, expiry proposed). (The
//     model lets a keepalive wait for a Renewed entry of its session that
//     was proposed before it arrived and is still uncommitted; the node
//     proposes one of its own, after the arrival, for every batch: a
//     subset of the model's schedules. Raft's commit of an entry the
//     followers appended before the arrival could be learnt late, as a
//     reply to a request sent before — the stale evidence of item 7.)
//   - Leader, takeover: a marked session's deadline is
//     markerApplied[origin] + TTL + ElectionTimeout (this replica's apply
//     time of the origin marker; if it does not know it, the marker came
//     with the snapshot it installed last, and the install time — after the
//     marker's commit, before the apply of any later marker — counts); a
//     session opened during the takeover (item 8): its replay time plus
//     TTL.
//   - Cost: one Renewed record per live session per leader term, batched
//     (N sessions: about N/MaxExpireSessions small entries after a leader
//     change, spread over the keepalive interval); keepalives are
//     otherwise never logged. The design's "keepalives themselves still
//     never go in the log" needs this exception written down (it is, in
//     docs/guarantees.md): no design without a per-session record per term
//     bounds P4 independently of the leaders' lifetimes (below).
//
// The bound. Let T be the arrival of the last keepalive of the session
// that a leader accepted, G = TTL + ElectionTimeout, E the longest time
// without a leader that has committed its barrier and taken over, δ the
// longest commit latency of a leader's entry, λ the longest lag between a
// marker's commit and its apply on a replica that later leads. The leader
// L that accepted T took over before T, so its deadline is at most T + G;
// it proposes the expiry then and commits it by T + G + δ unless deposed
// first. Every acknowledgement L gave followed the session's last Renewed
// entry, so the session's origin is the first marker after L: the next
// leader's barrier, committed by T + G + δ + E. Every later leader times
// the session from its own apply of that same marker: deadline at most
// T + G + δ + E + λ + G, whichever leader and however many changes; the
// leader then in office commits the expiry within δ, or is deposed and the
// next expires the session as it takes over (E + δ). So
//
//	P4: expired by T + 2·(TTL + ElectionTimeout) + 2·E + 3·δ + λ
//
// (Params.Bound4 without λ, which the model does not vary; the model
// reaches it exactly, TestBoundsAreReached). With LANTiming, a 10 s TTL, E
// about two heartbeat timeouts plus an election timeout (1.5 s) and δ of
// milliseconds: about 24 s. It assumes a leader that has taken over leads
// long enough to commit one entry (MinLead > δ); a replica that restarted
// replays the markers at its restart, so a restarted leader counts the
// bound from its restart at worst (each such restart can add up to TTL + ET
// while it leads; a replica that kept running restores the bound).
//
// Why a per-session record per term is needed. Take two executions whose
// logs are equal: in A the session stops renewing at T; in B it renews,
// and each leader acknowledges it once, just before it is deposed, with no
// log entry that depends on it. Leaders live less than TTL. A new leader
// cannot tell A from B, and in B it must not expire the session before the
// last acknowledgement + TTL − margin; so in A every leader change gives
// the session a new lease, and no bound independent of the number of
// changes exists. A design whose periodic checkpoint marks only sessions
// silent for θ (θ above the keepalive interval, so that live sessions
// rarely write) has the bound only while some leader lives θ + one
// checkpoint interval + δ after its takeover — it depends on the leaders'
// lifetimes; with takeover markers it does not.
//
// Lock-delays across leader changes (Variant.DelayCredit;
// today/delay-churn). Every replica records, in memory, the monotonic time
// at which it applied each delay-starting event (EventReleased with
// DelayFor > 0: an expiry, a Lapsed close or release, a revoke), keyed by
// fsm.DelayRef; a new leader arms each pending delay at that time +
// DelayFor (now + DelayFor when unknown: after a restart or a snapshot).
// No log or version change: the delay still never ends early (the apply is
// after the commit), and it ends by LockDelay + δ + E + δ + λ after it
// started (Params.BoundLive without λ), whatever the number of changes.
//
// The grace keeps its election timeout: it covers the stale evidence of a
// leader of the previous release during a rolling upgrade, and of
// VerifyLeader below version 4; with fresh evidence alone TTL would do
// (TestStaleEvidenceThreshold).
//
// # The properties and the guarantees (docs/guarantees.md, by section)
//
//   - "One holder at a time": P1, P3 (the lock-delay part), P6 (shared
//     grants); the operator exception is P1's exception.
//   - "Fencing tokens": P2, with the rebuild bound and the new cluster's
//     first-raise window as the stated exceptions.
//   - "Leases and expiry" (the client learns first): P1 for
//     ε ≤ margin/(TTL − margin) (5.3 % at TTL/20, TestRateThreshold),
//     including HTTP clients (Keeper).
//   - "Owner-aware release and renewal": the machine's compare-and-delete
//     by owner; keepalives name their session.
//   - "No grants without quorum": only a leader commits; a deposed leader
//     commits nothing and acknowledges within StaleAck (0 with item 7).
//   - "FIFO": P6 and Live.
//   - "Exactly once": P5.
//   - "Clocks": P3 against the wall-clock mutant; Live with DelayCredit
//     (today's "a failover can extend a delay" has no bound).
//   - To add: P4 — a session that stops renewing ends within
//     2·(TTL + ElectionTimeout) + 2·E + 3·δ (+λ), whatever the number of
//     leader changes; and the lock-delay bound of Live.
//
// Not modelled: restores prepared before a new leader's barrier (issue 45
// item 3: with restore as a replicated command, fixed/restore, it cannot
// arise); more than one lock (locks interact only through the counter,
// which P2 checks); Raft's own safety (assumed).
package lease
