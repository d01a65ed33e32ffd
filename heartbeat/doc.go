// Package heartbeat is the light heartbeat channel between host agents and
// the control plane (issue 12: heartbeat fan-in at scale), and the
// control plane's in-memory heartbeat table.
//
// # Why
//
// A full sync is an HTTPS request with a JSON body that reads the machine's
// desired state and used to write the database on every beat. At 100,000
// agents beating every 2 s that is 50,000 requests and 50,000 transactions
// a second. Here a beat is one 76-byte UDP datagram, checked and recorded
// in memory in about a microsecond, and the database sees one batch per
// flush interval for all the machines that beat.
//
// # The wire format
//
// Every datagram has the same layout (Message): magic "SLHB", version,
// kind, flags, machine id, sequence number, desired-state version, time
// (µs, on the control plane's clock) and key epoch, then an HMAC-SHA256 of
// all that under the machine's key. Kinds: a beat (agent → control plane);
// an ack carrying the current desired-state version; a sync request ("do a
// full sync now": the desired state changed, the machine is unknown here,
// or its key is old); and a poke, sent unasked to the address of the
// machine's last beat when its desired state changes, so that a rental
// still starts within milliseconds. A beat asks for an ack with FlagAck;
// agents ask on the first beat after a sync and every 30 s, so the
// control plane sends a fraction of the datagrams it receives. A sync
// request is sent whenever one is due.
//
// # Keys
//
// Keys derives a per-machine key per epoch (a day by default) from one
// secret, which the control plane derives from its master secret (HOME/
// secret.key, shared by replicas): nothing is stored, and every replica
// checks every agent's beats. A full sync hands the agent the current and
// the next epoch's key (suanli.HeartbeatChannel), over the same HTTPS
// connection as its API key; the previous epoch's key is still taken, with
// a request to sync for the new one.
//
// # What is rejected
//
// A datagram that is truncated or malformed, does not verify under the
// claimed machine's key (a forgery, or another machine's key), is signed
// for an epoch outside previous–next, repeats or goes back on the
// machine's sequence number (a replay), or is dated more than MaxSkew from
// the server's clock (an old datagram replayed after a restart) is dropped
// unanswered and counted by reason (Stats.Rejected; Prometheus
// suanli_heartbeat_rejected_total{reason}). A well-signed beat from a
// machine the table does not know is answered with a sync request and not
// recorded.
//
// # The table and its flushes
//
// Table keeps, per machine, the last beat heard (from this channel, or from
// a sync that changed nothing), the last one known to be in the store, the
// desired-state version the agent should have, and the address of its
// last beat. Table.Flush hands every beat newer than the store's to one
// write call, in machine order; the control plane's is
// sqlstore.RecordBeats, one transaction into a narrow table. A beat time in
// the store never goes back, and is always one a machine really sent: a
// crash loses at most the beats of one flush interval, and billing, which
// stops at a machine's last heartbeat, never bills past one it did not
// have. Table.Refresh folds in what the store says (machines added, a
// desired state changed through another replica, a machine the lease
// checker marked suspect), so that after a restart agents keep beating
// without a sync.
//
// # The server
//
// Server reads datagrams on a UDP socket, checks them against the Table
// and answers. On Linux the socket stays out of Go's network poller (which
// is edge-triggered: an idle runtime thread would wake for every datagram)
// and each reader reads and answers up to 256 datagrams per system call
// (recvmmsg, sendmmsg), letting a few milliseconds of datagrams gather when
// the load is light. It allocates nothing per datagram. Client is the
// agent's end.
//
// It must not read or write the database (the control plane hands Flush
// its writer), speak HTTP, or know about instances or billing.
package heartbeat
