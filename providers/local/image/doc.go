// Package image is the OCI image store of the local provider: it pulls
// images from registries, imports them from tarballs, and unpacks their
// layers on disk for overlayfs. It is the only package in berth that imports
// go-containerregistry.
//
// Importers: the local provider (providers/local), which stacks Resolve's
// layer directories into an overlay rootfs, and the CLI's `berth image`
// verbs. Nothing else should need it.
//
// # On disk
//
// A Store is opened on berth's state directory and uses two folders in it:
//
//	<state>/images/index.json   refs -> image records (written atomically)
//	<state>/images/*.lock       flock files for index writes and layer GC
//	<state>/layers/<hex>        one unpacked layer per sha256 diff ID
//
// # Layer per lowerdir, not a flattened rootfs
//
// Each layer is unpacked once, keyed by its diff ID (the digest of the
// uncompressed tar, which is verified while unpacking), and shared by every
// image that contains it. Resolve returns the directories lowest first; an
// overlay mount lists them in the opposite order (lowerdir=top:...:bottom).
// We chose this over flattening because images built on one base (the common
// case for benchmark tasks) then share the base on disk and pull only their
// own top layers, and because there is no second copy pass. The price is
// that whiteouts are kept as overlayfs whiteouts (a 0:0 character device for
// .wh.NAME, the trusted.overlay.opaque=y xattr for .wh..wh..opq), which needs
// root; berth's local provider runs as root anyway. Layer directories are
// named by bare hex digest, without a colon, because overlayfs splits
// lowerdir on colons; an image with very many layers can exceed the one-page
// limit on mount options with absolute paths, which a caller avoids by
// mounting with paths relative to LayersDir or with the new mount API.
//
// # Safety of unpacking
//
// Layers come from the network or from users' files, so unpacking refuses
// (InvalidArgument, naming the entry) absolute names, ".." components, any
// entry whose parent is a symlink or a file in the layer (no writes through
// symlinks, even ones pointing inside the layer), and hardlinks to
// anything but a file or symlink already unpacked from the same layer. All
// writes go through package dirfd on the layer's temporary directory,
// resolving every path with no symlink followed and acting on the last
// element without following it (owners, modes and times included), so
// even a bug in those checks cannot reach outside it. Device nodes are
// skipped: sandboxes get their /dev from the runtime, never from an image.
// Ownership, setuid, setgid and sticky bits, file capabilities and user.*
// xattrs are kept; trusted.* xattrs from a layer are dropped, since they
// would steer overlayfs.
//
// Each layer is unpacked into a temporary directory and renamed into place,
// so a layer directory that exists is complete; concurrent pulls of one
// layer, in one process or several, unpack it once. On any error the
// temporary directory is removed and the index is left unchanged.
//
// # Pulls a remote client aims
//
// PullWith with a Policy (driver.PullPolicy; berth serve sets one for the
// images its clients name) makes every connection of the pull, redirects
// included, through a dial guard (guard.go): a registry the policy allows
// is dialled as named; any other name is resolved once, each address is
// checked against IANA's special-purpose ranges (code.dny.dev/ssrf; an
// IPv4-mapped address is judged as its IPv4 address), and the checked
// addresses are dialled, so a name that answers differently later (DNS
// rebinding) has no second lookup to change. Such a pull uses no proxy,
// takes plain HTTP only to allowed registries, shares neither connections
// nor a flight with the operator's pulls, and fails with a *PullError
// whose text is the reference and a kind of failure; Detail holds what
// the registry answered, for the operator's log.
//
// # Committing
//
// Commit stores a directory of changes (a build step's overlay upper
// directory) as a new image on top of a stored one. The directory is
// written as an OCI layer tar, with its overlayfs whiteouts and opaque
// markers turned back into .wh. entries, and that stream is unpacked like
// any pulled layer, with the same checks, so a committed image is an
// ordinary one: its layer's diff ID is the digest of the tar. The
// directory should be still: the builder commits only after every process
// of its sandbox is dead. If one was missed, the walk still reads nothing
// outside the directory: it holds each directory by its fd and acts on one
// name at a time without following it (package dirfd), so a directory
// swapped for a symlink to a host directory is refused, never walked.
package image
