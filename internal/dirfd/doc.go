// Package dirfd is berth's one way of touching a file tree that something
// else controls: a sandbox's root file system seen from the host (the
// Dockerfile builder), an image layer being unpacked, a host directory that
// a tar stream from a sandbox is extracted into. Every operation starts
// from a directory file descriptor, never from a path string handed to the
// kernel whole, and never follows a symlink the tree holds anywhere but
// where the tree's own rules say:
//
//   - Paths resolve with openat2 from the root's fd: InRoot resolves them
//     as if the root were "/" (RESOLVE_IN_ROOT: links the tree holds are
//     followed, an absolute one from the root, ".." stops at the root), for
//     a sandbox's root that must look to a build step as it does inside;
//     Beneath refuses every symlink on the way (RESOLVE_BENEATH with
//     RESOLVE_NO_SYMLINKS), for trees the host extracts into, where a link
//     is data and never a way. Magic links (/proc/self/fd/...) and mount
//     crossings are refused in both.
//   - The last element of a path is acted on by name relative to its
//     parent's fd with the no-follow form of each call: openat O_NOFOLLOW
//     (O_EXCL for creation), fchownat and utimensat with
//     AT_SYMLINK_NOFOLLOW, linkat without AT_SYMLINK_FOLLOW, unlinkat,
//     mknodat, symlinkat. chmod has no no-follow form before Linux 6.6, so
//     Chmod opens the name O_PATH|O_NOFOLLOW, leaves a symlink alone (links
//     have no mode), and changes the mode of exactly that inode through
//     /proc/self/fd.
//
// So whatever a process racing the host does to names in the tree (swap a
// file for a symlink to /etc/shadow between a mknod and a chmod, a directory
// for a link to / in the middle of a copy), the host changes nothing
// outside the tree: the worst a race achieves is an operation on another
// name inside it. The local provider still kills every process of a build
// step before the next step touches the tree; this layer is what makes a
// missed one harmless.
//
// Errors are *fs.PathError values naming the path in the tree, so that
// errors.Is works with fs.ErrNotExist, fs.ErrExist and the errno values
// (unix.ELOOP for a symlink Beneath refused, unix.EXDEV for an escape).
//
// Importers: image (layer unpacking and commits), imagebuild (the
// Dockerfile builder), sandbox/hosttar (tar extraction on the host) and
// the packages built on them; envd for UnixMode, the chmod(2) numbering
// its file entries carry. It needs Linux 5.6 (openat2) and /proc.
package dirfd
