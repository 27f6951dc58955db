// Package records is where rollouts remember what they did: revision records in each workload
// cluster, the rollout's progress and invalid-revision ledger in the management cluster, and the
// Lease that keeps two applies of one rollout apart. Terraform state mirrors these records; they
// survive lost or replaced state and are what Read refreshes from.
//
// A rollout is named by a Key (the kind of owner, e.g. "rollout", and the owner's namespace and
// name in the management cluster). Object names derive from it as
// <readable>.<hash> where <readable> is "kind-namespace-name" lower-cased, cut to 40 characters,
// and <hash> the first 16 hex digits of SHA-256("kind/namespace/name"): long names are cut
// deterministically and two keys never share objects. Labels carry the hash; the annotation
// gradual.dev/rollout-key carries the full key, which every read checks.
//
// # Workload clusters (WorkloadStore)
//
// In the records namespace (default gradual-system, created on first write), one Secret per
// revision of each rollout, like Helm's release Secrets:
//
//	name         gradual.v1.<readable>.<hash>.<revision>
//	type         gradual.dev/revision.v1
//	labels       app.kubernetes.io/managed-by=gradual
//	             gradual.dev/rollout=<hash>
//	             gradual.dev/revision=<revision>
//	             gradual.dev/state=current|backup|invalid|provisioning|superseded
//	             gradual.dev/chunk=0
//	annotations  gradual.dev/rollout-key, gradual.dev/applied-at, gradual.dev/state-changed-at,
//	             gradual.dev/reason (when marked invalid), gradual.dev/chunks, gradual.dev/digest
//	data         record: gzip of the JSON record (key, revision, manifests, inventory)
//
// The state lives in the label (and reason and times in annotations), not in the compressed
// data, so a transition is one small metadata patch. A compressed record larger than ChunkSize
// (900 KiB; Secrets are limited to 1 MiB) is split: the head Secret above holds the first
// chunk, and Secrets named <head>.<i> (labels as above but gradual.dev/chunk=<i> and no state)
// hold the rest. Chunks are written before the head and the head carries their count and the
// SHA-256 of the whole payload, so a record exists only once complete and a torn read is
// detected. Chunks without a head (a write or delete that was interrupted) are ignored, and
// removed by the next MarkCurrent, MarkInvalid or Restored.
//
// Records are read with bounds, as anyone who can write Secrets in the records namespace can
// plant some: every list is selected by the rollout's labels (other Secrets of the namespace are
// never read), and a Secret with those labels that lacks what the store gives every record of
// the rollout (its rollout-key annotation, the name made of key, revision and chunk) is left
// alone: never decoded, relabelled or deleted. So is a record someone other than the provider
// wrote or edited: the stores write every record with the field manager RecordsFieldManager
// (records of earlier versions carry "terraform-provider-gradual", their user agent's), and a
// record whose data, managed-by label or gradual.dev/ labels and annotations another manager
// last wrote (kubectl-create, kubectl-edit, ...; see ForeignWriters) is not read, and a write
// that would replace it fails, naming it. A record whose Secrets hold more than
// MaxSecretDataSize bytes each or are more than MaxRecordChunks, or whose data decompresses to
// more than MaxRevisionRecordSize (decompression stops there), or that is torn, corrupt or holds
// another rollout's payload, is not decoded. Reads report all of these in State.Skipped, for
// the caller to warn, except that a current, backup or provisioning record that cannot be
// decoded fails the read (restore and pruning depend on it), as does one labelled so that
// someone else wrote. Summary reads no record data; LoadCurrent reads only the current record's.
//
// States and transitions, each safe to re-run after an interruption, none ever leaving two
// current records (an old current is demoted before a new one is promoted):
//
//	MarkProvisioning  the revision is about to be applied: its record is written (or relabelled)
//	                  provisioning, clearing any invalid mark (a deliberate retry); another
//	                  provisioning record becomes superseded (its objects may still be on the
//	                  cluster, so pruning should consider its inventory)
//	MarkCurrent       provisioning -> current; old current -> backup; old backup deleted;
//	                  superseded records deleted
//	MarkInvalid       the revision failed: a backup becomes invalid at once; a record whose
//	                  change is still on the cluster (provisioning, current) keeps its state
//	                  with the reason, so an interrupted restore still shows as unsettled
//	MarkRollingBack   current -> provisioning, before restoring the backup
//	Restored          the cluster is back on its last good revision (State.LastGood): the
//	                  current record unless marked invalid, else the backup, is current;
//	                  records marked invalid become invalid, other provisioning and superseded
//	                  records are deleted
//	Delete            every record of the rollout is deleted
//
// The engine's events map one to one: provisioning, succeeded, invalid, rolling-back and
// restored to the calls above; restore-failed to none (the record stays provisioning). Only the
// newest MaxInvalid (10) invalid records are kept.
//
// # Management cluster (ManagementStore, Acquire)
//
// In the records namespace of the management cluster (default gradual-system, created on first
// write), per rollout:
//
//	Secret  gradual.<readable>.<hash>, type gradual.dev/rollout.v1, labels managed-by and
//	        gradual.dev/rollout, data "record": gzip of the JSON {progress, ledger} (Progress
//	        and the list of InvalidEntry), cut like the workload records: the head holds the
//	        first chunk of at most ChunkSize bytes and the annotations gradual.dev/chunks and
//	        gradual.dev/digest; Secrets <head>.<digest[:12]>.<i> (type
//	        gradual.dev/rollout-chunk.v1, label gradual.dev/chunk=<i>) hold the rest. Progress's
//	        Config (the resource configuration kept for import, possibly megabytes) is stored
//	        apart, compressed, in Secrets <head>.config.<digest[:12]>.<i> (i from 0) named by the
//	        head's gradual.dev/config annotation, and written only when it changes: progress
//	        writes stay small, and the ledger is read without it. Chunks are named by the digest
//	        of what they hold and written before the head, so a write that loses a race never
//	        tears the record that won; chunks of a replaced record are deleted after the head is
//	        written. Secrets written before compression (JSON in data "progress" and "ledger")
//	        are still read, and rewritten compressed on the next change.
//	        A Secret, not a ConfigMap: no credentials are stored, but reasons may
//	        quote manifests and manifests may hold secrets, and Secrets are what RBAC and
//	        encryption at rest already protect.
//	Lease   gradual.<readable>.<hash> (coordination.k8s.io/v1): holder, acquire and renew times.
//	        Expiry is judged by observed time (see Held): a contender takes the Lease over only
//	        after watching it go unrenewed for its duration plus a quarter by its own clock.
//
// A management record (head or chunk) that someone other than the provider wrote or edited (see
// ForeignWriters) is neither used nor changed: its reads and writes fail, naming it and its
// writer, so that a planted ledger or progress neither blocks nor unblocks a rollout unseen.
//
// Every read-modify-write of the record is guarded by the head's resourceVersion and retried on
// conflict (and serialised within one process), so progress and ledger writers never lose each
// other's changes. The Lease is read and written as unstructured objects, so any client works,
// whatever its scheme.
package records
